"""A file that is not bars stops `trader backtest` and `trader run --replay` with exit 65 and
one line naming the file and what is wrong: no traceback, and before any model loads."""

from __future__ import annotations

import random

import pytest

from tests.integration.conftest import Cli
from tests.unit.market.test_files import BAD_FILES, SOL, make_bad_file, table_of, write

pytestmark = pytest.mark.integration
# Each run costs seconds: the kinds of bad file (all are read in tests/unit/market/test_files.py;
# a missing file is in test_backtest.py), and one that only --strict refuses.
KINDS = ["empty", "header only", "random bytes", "png", "truncated parquet", "ragged rows"]


def shuffled_excerpt(cli: Cli) -> str:
    header, rows = table_of(SOL)
    shuffled = list(rows)
    random.Random(5).shuffle(shuffled)  # noqa: S311 - a fixed order, not a secret
    return str(write(cli.cwd / "SOLUSDT_1h.csv", header, shuffled))


def assert_refused(done, verb: str, path: str, says: str) -> None:
    assert done.returncode == 65, done.stderr
    assert done.stderr.startswith(f"trader {verb}: {path}: ")
    assert says in done.stderr
    assert done.stderr.count("\n") == 1
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", [*KINDS, "shuffled, --strict"])
def test_backtest_refuses_a_bad_file_in_one_line(cli, name):
    if name in BAD_FILES:
        path, says, strict = str(make_bad_file(cli.cwd, name)), BAD_FILES[name][2], []
    else:  # the reading options reach the reader
        path, says, strict = shuffled_excerpt(cli), "not in time order", ["--strict"]
    done = cli.run("backtest", "--data", path, "--symbol", "X/USDT", "--model", "baseline", *strict)
    assert_refused(done, "backtest", path, says)


def test_run_replay_refuses_a_bad_file_in_one_line(cli):
    png = str(make_bad_file(cli.cwd, "png"))
    assert_refused(cli.run("run", "--replay", png), "run", png, BAD_FILES["png"][2])
    shuffled = shuffled_excerpt(cli)
    done = cli.run("run", "--replay", shuffled, "--strict")
    assert_refused(done, "run", shuffled, "not in time order")
