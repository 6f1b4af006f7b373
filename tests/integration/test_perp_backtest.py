"""A perpetual's backtest (`market.kind = "perp"`) over recorded bars with a funding recording
beside them: the funding booked at each funding time equals the rate x the mark price x the
position held then, summed here from the fixture files and the run's fills alone; the report
says "funding paid/received" on its own line; bars without funding are refused unless the
user says to assume none.

The fixtures (tests/data/perp/README.md): 300 recorded SOL/USDT hours; a funding file in the
columns of Binance's documented `GET /fapi/v1/fundingRate` answer (symbol, fundingRate,
fundingTime, markPrice: developers.binance.com, USDⓈ-M futures, "Get Funding Rate History"),
every 8h then every 4h, with markPrice in the 8h part and without it in the 4h part (as
Aster's `/fapi/v3/fundingRate` answers); mark-price candles in the columns of ccxt's
`fetch_ohlcv(..., params={"price": "mark"})` rows.
"""

from __future__ import annotations

import asyncio
import csv
import gzip
import itertools
import json
import shutil
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from tests.integration.conftest import clean_env
from trader.backtest.funding import load_perp_data
from trader.backtest.report import statistics_json, terminal_summary, write_report
from trader.backtest.run import Backtest, run_backtest
from trader.config.schema import Settings
from trader.domain import Bar, Fill, Liquidity, Side
from trader.exit_codes import EX_ARGUMENTS, EX_DATAERR
from trader.market.replay import read_recording

pytestmark = pytest.mark.integration

PERP = Path(__file__).parents[1] / "data" / "perp"
BARS = PERP / "SOLUSDT_1h.csv.gz"
HOUR_MS = 3_600_000
SETTINGS = {
    "market": {"kind": "perp", "context_bars": 32, "min_contiguous_bars": 16},
    "forecast": {"model": "baseline", "horizon": 2, "baseline_lookback": 16},
    # simple goes long on a rising forecast and, shorts allowed, short on a falling one.
    "strategy": {"allow_short": True, "position_fraction": 0.5},
    "risk": {"min_edge_bps": 0, "max_drawdown": 1.0, "max_daily_loss": 1.0},
}


def _env(folder: Path, **extra: str) -> dict[str, str]:
    settings = {
        "TRADER_BACKTEST__CACHE_DIR": str(folder / "cache"),
        "TRADER_MARKET__CONTEXT_BARS": "32",
        "TRADER_MARKET__MIN_CONTIGUOUS_BARS": "16",
        "TRADER_FORECAST__BASELINE_LOOKBACK": "16",
        "TRADER_FORECAST__HORIZON": "2",
        "TRADER_STRATEGY__ALLOW_SHORT": "true",
        "TRADER_RISK__MIN_EDGE_BPS": "0",
        "TRADER_RISK__MAX_DRAWDOWN": "1.0",
        "TRADER_RISK__MAX_DAILY_LOSS": "1.0",
    }
    return clean_env(**(settings | extra))


def _funding_rows() -> list[dict[str, str]]:
    with (PERP / "funding" / "SOLUSDT_1h.csv").open(newline="") as f:
        return list(csv.DictReader(f))


def _mark_closes() -> dict[int, Decimal]:
    """Each mark candle's close by its close time (open + 1h)."""
    with (PERP / "mark" / "SOLUSDT_1h.csv").open(newline="") as f:
        return {int(r["timestamp"]) + HOUR_MS: Decimal(r["close"]) for r in csv.DictReader(f)}


def _held(fills: list[Fill], at_ms: int) -> Decimal:
    """The position at a funding time: a market order at a tick goes in after the bar closing
    then was seen (after a funding at that time); a resting fill at a tick filled during the
    bar ending then (before it)."""
    held = Decimal(0)
    for fill in fills:
        stamped = int(fill.at.timestamp() * 1000)
        if stamped < at_ms or (fill.liquidity is Liquidity.MAKER and stamped == at_ms):
            held += fill.amount if fill.side is Side.BUY else -fill.amount
    return held


def _expected(result: Backtest) -> list[tuple[int, Decimal, Decimal, Decimal, Decimal]]:
    """(time, rate, mark, position, paid) at every funding time a position was held."""
    fills = list(result.runs["simple"].fills)
    marks = _mark_closes()
    first, last = int(result.ticks_ms[0]), int(result.ticks_ms[-1])
    expected = []
    for row in _funding_rows():
        at, rate = int(row["fundingTime"]), Decimal(row["fundingRate"])
        if not first < at <= last:
            continue
        held = _held(fills, at)
        if held == 0:
            continue
        # The exchange's own mark for the charge where given; else the last mark candle closed.
        if row["markPrice"]:
            mark = Decimal(row["markPrice"])
        else:
            mark = marks[max(t for t in marks if t <= at)]
        expected.append((at, rate, mark, held, mark * held * rate))
    return expected


@pytest.fixture(scope="module")
def perp_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Backtest, Path]:
    folder = tmp_path_factory.mktemp("perp")
    settings = Settings(**SETTINGS, backtest={"cache_dir": folder / "cache"})
    recording = read_recording(BARS)
    perp = load_perp_data([recording], HOUR_MS)
    result = asyncio.run(
        run_backtest(settings, {"SOL/USDT": recording}, strategies=["simple"], perp=perp)
    )
    write_report(result, folder / "report")
    return result, folder / "report"


@pytest.fixture(scope="module")
def spot_run(tmp_path_factory: pytest.TempPathFactory) -> Backtest:
    """The same bars and settings as a spot market: no funding, marked on the bar close."""
    folder = tmp_path_factory.mktemp("spot")
    market = {**SETTINGS["market"], "kind": "spot"}
    settings = Settings(**{**SETTINGS, "market": market}, backtest={"cache_dir": folder / "c"})
    recording = read_recording(BARS)
    return asyncio.run(run_backtest(settings, {"SOL/USDT": recording}, strategies=["simple"]))


def test_funding_booked_is_rate_times_mark_times_position_at_each_funding_time(perp_run):
    result, _ = perp_run
    assert result.funding is not None
    booked = result.funding.payments["simple"]["SOL/USDT"]
    expected = _expected(result)
    assert [(p.at_ms, p.rate, p.mark, p.position, p.paid) for p in booked] == expected
    # What the fixture covers: long and short, 8h and 4h intervals, both sources of the mark.
    positions = [held for _, _, _, held, _ in expected]
    assert min(positions) < 0 < max(positions)
    times = [at for at, *_ in expected]
    gaps = {(b - a) // HOUR_MS for a, b in itertools.pairwise(times)}
    assert {4, 8} <= gaps
    assert {p.mark_from for p in booked} == {"funding record", "mark candle"}
    total = sum((paid for *_, paid in expected), Decimal(0))
    assert result.funding.totals("simple").net == total


def test_funding_moves_the_equity_and_the_report_shows_its_own_line(perp_run, spot_run):
    result, report = perp_run
    total = sum((paid for *_, paid in _expected(result)), Decimal(0))
    # The engine pays funding out of cash as it goes (helper D's `engine.perps`), so its
    # sizing sees it and the trades need not be the spot run's. The ledger's last equity is
    # the fills' cash less the funding, plus what is held on the last mark.
    run = result.runs["simple"]
    fills = list(run.fills)
    cash = Decimal(str(run.starting_cash))
    for fill in fills:
        cash -= (fill.amount if fill.side is Side.BUY else -fill.amount) * fill.price + fill.fee
    held = sum((f.amount if f.side is Side.BUY else -f.amount for f in fills), Decimal(0))
    mark = _mark_closes()[max(t for t in _mark_closes() if t <= int(result.ticks_ms[-1]))]
    assert run.equity[-1] == pytest.approx(float(cash - total + held * mark), abs=1e-6)
    summary = terminal_summary(result)
    assert "simple: funding paid/received:" in summary
    markdown = (report / "report.md").read_text()
    assert "## Funding paid/received" in markdown
    assert "simple: funding paid/received:" in markdown
    assert "funding paid/received" in (report / "report.html").read_text()
    stats = json.loads((report / "stats.json").read_text())
    assert Decimal(stats["funding"]["strategies"]["simple"]["total"]["net_paid"]) == total
    with (report / "funding.csv").open(newline="") as f:
        records = list(csv.DictReader(f))
    assert sum(Decimal(r["paid"]) for r in records) == total
    assert statistics_json(result)["funding"]["assumed_zero"] == []
    assert "funding" not in statistics_json(spot_run)  # a spot report is as it was


def test_bars_without_funding_are_refused_unless_zero_funding_is_assumed(cli):
    bare = cli.cwd / "bars"
    bare.mkdir()
    shutil.copy(BARS, bare / BARS.name)
    env = _env(cli.cwd, TRADER_MARKET__KIND="perp")
    args = ["backtest", "--data", str(bare / BARS.name), "--model", "baseline",
            "--strategy", "simple"]  # fmt: skip
    refused = cli.run(*args, env=env)
    assert refused.returncode == EX_DATAERR
    first = refused.stderr.splitlines()[0]
    assert first.startswith("trader backtest: market.kind = perp, but there is no funding")
    assert "--assume-zero-funding" in first
    assert "Traceback" not in refused.stderr
    out = cli.cwd / "report"
    done = cli.run(*args, "--assume-zero-funding", "--out", str(out), env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("READ THIS FIRST")
    assert "funding assumed zero (--assume-zero-funding) for SOL/USDT" in done.stdout
    markdown = (out / "report.md").read_text()
    first_section = markdown.split("## Read this first", 1)[1].split("\n## ", 1)[0]
    assert "funding assumed zero" in first_section
    assert "net received 0.00 USDT at 0 funding times" in markdown
    stats = json.loads((out / "stats.json").read_text())
    assert stats["funding"]["assumed_zero"] == ["SOL/USDT"]


def test_the_cli_backtests_a_perp_with_its_funding_and_spot_refuses_the_flag(cli):
    out = cli.cwd / "report"
    args = ["backtest", "--data", str(BARS), "--model", "baseline", "--strategy", "simple"]
    done = cli.run(*args, "--out", str(out), env=_env(cli.cwd, TRADER_MARKET__KIND="perp"))
    assert done.returncode == 0, done.stderr
    assert "simple: funding paid/received: paid" in done.stdout
    assert "funding assumed zero" not in done.stdout
    assert (out / "funding.csv").is_file()
    grid = cli.run(*args, "--grid", "strategy.position_fraction=0.2,0.4",
                   env=_env(cli.cwd, TRADER_MARKET__KIND="perp"))  # fmt: skip
    assert grid.returncode == EX_ARGUMENTS
    assert "a grid or walk-forward over a perpetual does not pay its funding yet" in grid.stderr
    spot = cli.run(*args, "--assume-zero-funding", env=_env(cli.cwd))
    assert spot.returncode == EX_ARGUMENTS
    assert "--assume-zero-funding is for perpetuals" in spot.stderr.splitlines()[0]


def test_the_fixture_bars_are_the_recorded_excerpt_s_first_rows():
    with gzip.open(BARS, "rt") as perp, gzip.open(PERP.parent / "SOLUSDT_1h.csv.gz", "rt") as all_:
        mine = perp.read().splitlines()
        theirs = all_.read().splitlines()
    assert mine == theirs[: len(mine)]


async def test_the_download_records_the_futures_emulator_s_funding_and_mark_candles(
    tmp_path, monkeypatch
):
    """ccxt's real `binanceusdm` against the futures emulator (helper B's, serving
    /fapi/v1/fundingRate and /fapi/v1/markPriceKlines as Binance documents them): the funding
    times as recorded there (8h, then 4h, then 1h), each page after the last time given."""
    from tests.integration.futures_setup import BARS as HOURS  # noqa: PLC0415
    from tests.integration.futures_setup import HOUR, SOL, START, PerpSpec, flat, perps  # noqa: PLC0415
    from trader.emulator.futures_market import FundingEvent  # noqa: PLC0415
    from trader.emulator.market import Instrument  # noqa: PLC0415
    from trader.market import download_perp as module  # noqa: PLC0415
    from trader.market.files.funding import read_funding, read_marks  # noqa: PLC0415

    monkeypatch.setattr(module, "FUNDING_PAGE", 3)
    monkeypatch.setattr(module, "MARK_PAGE", 10)
    hours = [0, 8, 16, 20, 24, 28, 29, 30, 31, 32]
    events = [FundingEvent(START + timedelta(hours=h), Decimal(f"0.000{h + 10}") * (-1) ** h,
                           Decimal(f"{100 + h}.25")) for h in hours]  # fmt: skip
    mark = [
        Bar("SOL/USDT", HOUR, START + n * HOUR.duration, 100 + n, 101 + n, 99 + n, 100.5 + n, 0.0)
        for n in range(HOURS)
    ]  # fmt: skip
    listed = PerpSpec(Instrument("SOL/USDT"), flat("SOL/USDT", 100.0, 0.5), mark, events)
    bars = tmp_path / "binanceusdm" / "SOLUSDT_USDT_1h.parquet"
    until = START + timedelta(hours=31)
    async with perps(listed, start_hour=40) as p:
        report = await module.download_perp(p.exchange, SOL, HOUR, START, until, bars)
        recorded = read_funding(report.funding)
        later = START + timedelta(hours=40)  # resumed: what is new, after what is there
        again = await module.download_perp(p.exchange, SOL, HOUR, START, later, bars)
    assert [r.at_ms for r in read_funding(again.funding)] == [
        int(e.time.timestamp() * 1000) for e in events
    ]
    assert (report.candles, again.candles) == (31, 40)
    assert [(r.at_ms, r.rate, r.mark) for r in recorded] == [
        (int(e.time.timestamp() * 1000), e.rate, e.mark) for e in events if e.time < until
    ]
    assert report.intervals_h == (8.0, 4.0, 1.0)
    assert report.marks is not None
    candles = read_marks(report.marks, HOUR_MS).candles
    assert [(c.open_ms, c.close) for c in candles] == [
        (int(b.start.timestamp() * 1000), Decimal(str(b.close))) for b in mark[:40]
    ]


async def test_trader_download_of_a_perp_then_its_backtest_pays_the_funding(cli):
    """`trader download` (market.kind = perp) from the futures emulator, then `trader backtest`
    of the folder it wrote: the funding recording is found beside the bars and paid."""
    from tests.integration.futures_setup import HOUR, SOL, START, perps, spec  # noqa: PLC0415
    from trader.config.market_settings import ExchangeSettings  # noqa: PLC0415
    from trader.emulator.futures_market import FundingEvent  # noqa: PLC0415
    from trader.market.download_cli import download_history  # noqa: PLC0415

    events = [FundingEvent(START + timedelta(hours=h), Decimal("0.0005"), Decimal(100))
              for h in range(0, 48, 4)]  # fmt: skip
    out = cli.cwd / "data"
    async with perps(spec("SOL", funding=events), start_hour=47.9) as p:
        settings = ExchangeSettings(id="binanceusdm", api_base_url=p.base_url)
        until = START + timedelta(hours=47)
        code = await download_history(settings, [SOL], HOUR, START, until, out, "perp")
    assert code == 0
    folder = out / "binanceusdm"
    assert sorted(p.name for p in folder.iterdir()) == [
        "SOLUSDT_USDT_1h.parquet", "funding", "mark",
    ]  # fmt: skip
    env = _env(cli.cwd, TRADER_MARKET__KIND="perp", TRADER_MARKET__CONTEXT_BARS="16",
               TRADER_FORECAST__BASELINE_LOOKBACK="8")  # fmt: skip
    done = cli.run("backtest", "--data", str(folder), "--model", "baseline", "--strategy",
                   "simple", "--allow-skips", env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "perpetual, 12 funding times from funding/SOLUSDT_USDT_1h.parquet" in done.stdout
    assert "simple: funding paid/received:" in done.stdout
    assert "buy & hold on SOL/USDT: funding paid/received: net paid" in done.stdout


def test_two_perpetuals_the_portfolio_pays_both_symbols_funding(tmp_path):
    for name in ("SOLUSDT_1h.csv.gz", "ETHUSDT_1h.csv.gz"):
        shutil.copy(BARS, tmp_path / name)
        for kind in ("funding", "mark"):
            (tmp_path / kind).mkdir(exist_ok=True)
            shutil.copy(PERP / kind / "SOLUSDT_1h.csv", tmp_path / kind / f"{name[:-7]}.csv")
    recordings = {r.symbol: r for r in (read_recording(p) for p in sorted(tmp_path.glob("*.gz")))}
    assert sorted(recordings) == ["ETH/USDT", "SOL/USDT"]

    def run(kind: str) -> Backtest:
        market = {**SETTINGS["market"], "kind": kind}
        cache = {"cache_dir": tmp_path / "cache"}
        settings = Settings(**{**SETTINGS, "market": market}, backtest=cache)
        perp = load_perp_data(recordings.values(), HOUR_MS) if kind == "perp" else None
        return asyncio.run(run_backtest(settings, recordings, strategies=["simple"], perp=perp))

    perp = run("perp")
    assert perp.funding is not None
    paid = perp.funding.totals("simple")
    by_symbol = [perp.funding.totals("simple", s) for s in ("ETH/USDT", "SOL/USDT")]
    assert paid.net == sum((t.net for t in by_symbol), Decimal(0))
    assert all(t.times for t in by_symbol)
    # The engine's own funding rows, both symbols', are what the report counts.
    booked = perp.runs["simple"].funding
    assert {r.symbol for r in booked} == {"ETH/USDT", "SOL/USDT"}
    assert sum((r.paid for r in booked), Decimal(0)) == paid.net
