"""`python -m hourglass_client.cli`."""

from hourglass_client.cli import main

main()
