"""`trader download` end to end: the real command, ccxt, and the emulator on loopback."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path

import pytest

from tests.integration.conftest import TRADER, clean_env
from tests.integration.emulated import venue
from tests.integration.test_market_ledger import klines_since
from trader.domain import decimal_from_float
from trader.emulator import EmulatorServer, Fault
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration


SINCE, UNTIL = "2020-08-11T06:00:00", "2020-09-22T14:00:00"  # about 1,000 recorded bars


async def trader_download(cwd: Path, base_url: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        TRADER, "download", "--symbols", "SOL/USDT", "--timeframe", "1h",
        "--since", SINCE, "--until", UNTIL, *args,
        cwd=cwd, env=clean_env(TRADER_EXCHANGE__API_BASE_URL=base_url,
                               TRADER_EXCHANGE__RETRY_MAX_DELAY_S="0.2"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def eight_decimals(value: float) -> float:
    return float(f"{decimal_from_float(value):.8f}")


async def test_download_writes_the_history_and_resumes_where_it_stopped(tmp_path):
    v = venue(count=1200, start_index=1100)
    expected = [b for b in v.bars["SOL/USDT"] if b.end <= datetime.fromisoformat(UNTIL + "+00:00")]
    # 50 bars a page: 20 pages, a checkpoint every 10; the exchange fails from the 13th on.
    async with EmulatorServer(v.market, klines_cap=50) as server:
        server.faults.add(Fault("status", "/api/v3/klines", status=503, times=-1, skip=12))
        code, _out, err = await trader_download(tmp_path, server.base_url)
        assert code == 69, err
        assert "run it again to resume" in err
        path = tmp_path / "data" / "binance" / "SOLUSDT_1h.parquet"
        partial = read_recording(path)
        assert len(partial.rows) == 500  # the last checkpoint: 10 pages
        server.faults.clear()
        server.requests.clear()
        code, out, err = await trader_download(tmp_path, server.base_url)
        assert code == 0, err
    assert f"SOL/USDT: {len(expected)} bars" in out
    assert klines_since(server.requests)[0] == partial.rows[-1][0] + 3_600_000
    recording = read_recording(path)
    assert recording.timeframe.text == "1h"
    assert [row[0] for row in recording.rows] == [int(b.start.timestamp() * 1000) for b in expected]
    assert [row[4] for row in recording.rows] == [eight_decimals(b.close) for b in expected]
    assert not (path.parent / "SOLUSDT_1h.parquet.partial").exists()


async def test_an_unknown_symbol_is_named(tmp_path):
    v = venue()
    async with EmulatorServer(v.market) as server:
        code, _out, err = await trader_download(tmp_path, server.base_url, "--symbols", "SOLUSDT")
    assert code == 64
    assert "SOLUSDT (did you mean SOL/USDT?)" in err


def test_download_needs_a_start_date(cli):
    result = cli.run("download")
    assert result.returncode == 2
    assert "--since" in result.stderr
