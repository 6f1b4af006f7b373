"""Settings: the schema, the layered loader with provenance, and their rendering."""

from trader.config.loader import (
    ConfigError,
    LoadedSettings,
    Origin,
    load_from_environment,
    load_settings,
)
from trader.config.schema import Settings

__all__ = [
    "ConfigError",
    "LoadedSettings",
    "Origin",
    "Settings",
    "load_from_environment",
    "load_settings",
]
