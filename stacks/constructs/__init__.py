"""Building blocks composed by the Hourglass stack."""
