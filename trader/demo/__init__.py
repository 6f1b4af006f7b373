"""`trader demo`: the real daemon (`trader run --replay`), offline, over a recorded excerpt that
ships with the package, with the paper broker and the baseline forecaster, for a bounded number
of ticks; then what happened, read back from the ledger it wrote.

`run.py` starts and watches the daemon; `summary.py` reads its ledger. The excerpt is the first
1,000 hours of `SOLUSDT_1h.csv` (SOL/USDT spot, 2020-08-11 06:00 to 2020-09-21 21:00).
"""
