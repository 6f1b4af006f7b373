"""trader: a paper/live trading daemon driven by time-series foundation models."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("trader")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
