"""``python -m recordkeeper.cli``."""

from recordkeeper.cli.app import main

main()
