"""The `berth` command: the parsers, the commands and the local stack it supervises."""
