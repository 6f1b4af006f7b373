"""The CLI starts light: every parser is built on each start, so `--help` must load nothing but
the standard library and `trader` itself, and the config verbs nothing heavier than pydantic.
Each case runs in a fresh interpreter, where `sys.modules` tells what an import really cost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trader.cli import VERBS

# What a verb may only load when it runs: the model runtime, the exchange client, data frames.
HEAVY = {"torch", "ccxt", "pandas", "numpy", "pyarrow", "aiohttp", "exchange_calendars"}

PROBE = """
import contextlib, io, json, sys
from trader.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(json.loads(sys.argv[1]))
    except SystemExit:
        pass
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def loaded_by(*args: str) -> set[str]:
    """The top-level modules `trader ARGS` has imported by the time it returns."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def outside_the_standard_library(modules: set[str]) -> set[str]:
    # Names with a leading underscore are the interpreter's and setuptools' import machinery
    # (the editable install's finder, _distutils_hack, _sysconfigdata).
    return {m for m in modules - set(sys.stdlib_module_names) if not m.startswith("_")}


def test_a_bare_help_loads_only_the_standard_library_and_trader():
    assert outside_the_standard_library(loaded_by("--help")) == {"trader"}


@pytest.mark.parametrize(
    "verb",
    [*(v.__name__.rsplit(".", 1)[-1] for v in VERBS), "config show", "bench compile"],
)
def test_every_verbs_help_loads_only_the_standard_library_and_trader(verb):
    assert outside_the_standard_library(loaded_by(*verb.split(), "--help")) == {"trader"}


@pytest.mark.parametrize("action", ["show", "check", "template"])
def test_the_config_verbs_load_the_settings_and_nothing_heavy(action):
    loaded = loaded_by("config", action)
    assert "pydantic" in loaded  # it did read the settings
    assert not loaded & HEAVY
