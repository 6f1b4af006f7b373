"""The exit statuses every verb shares: 0 did what was asked; 1 ran but did not (what went
wrong is printed first); 2 the command line is wrong (as argparse exits); the rest from
sysexits.h, so a supervisor can tell a bad configuration from a venue that is down."""

EX_OK = 0
EX_FAILED = 1
EX_ARGUMENTS = 2
EX_USAGE = 64
EX_DATAERR = 65  # the ledger or the data cannot be used as they are
EX_UNAVAILABLE = 69  # the device, the model or the venue is not available here
EX_SOFTWARE = 70  # an error nobody foresaw (logged with its traceback)
EX_CANTCREAT = 73  # an output file or folder cannot be created (not a folder, not writable, a link)
EX_IOERR = 74  # a write the disk refused (full, failing, read-only): free space, run again
EX_TEMPFAIL = 75  # could not finish now: try again later
EX_CONFIG = 78  # the configuration forbids it
