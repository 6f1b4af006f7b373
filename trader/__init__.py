"""trader: a paper/live trading daemon driven by time-series foundation models."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # `trader.__version__`, read from the installed metadata only when asked for:
    # importlib.metadata costs more than the whole of `trader --help`.
    if name != "__version__":
        raise AttributeError(f"module 'trader' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    try:
        return version("trader")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0.0.0+unknown"
