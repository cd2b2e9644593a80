"""One module per AWS or HTTP integration; each turns client errors into project errors."""
