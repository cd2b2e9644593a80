"""Local development stack: run Hourglass against AWS emulators."""
