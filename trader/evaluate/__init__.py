"""`trader evaluate`: forecast skill over rolling origins."""
