"""Python's cyclic garbage collector paused around work that makes many objects and no cycles.

A backtest holds hundreds of thousands of objects at once (the judged rows, the data step's
plan, the forecasts, the ledger's rows): while they pile up, every full collection walks them
all again, for garbage that reference counting frees anyway. Paused, the collector runs again
as it was afterwards, and frees then whatever cycles the work left.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic collector off in the block (and as it was after it); nested, the outer
    block's end turns it back on."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
