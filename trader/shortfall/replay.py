"""The daemon's period again, through the backtest's engine (`runner.run_replay`: the same
`build_engine`, the paper broker, the replay venue and its modelled quotes, which
`tests/integration/test_backtest_equivalence.py` holds equal to the backtest's fast path), on
the bars the daemon stored, with the forecasts it made (`LedgerForecaster`), and with the
settings each of its starts recorded: a stretch per start, one replay ledger carried on from
stretch to stretch as the daemon's was.

The replay always begins at the daemon's first tick whose window the stored bars cover, so
its account is the daemon's from the start; `--from/--to` narrow what is compared, not what is
replayed."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from trader.config.record import differences, recorded_settings, settings_from_record
from trader.config.schema import Settings
from trader.domain import Timeframe
from trader.domain.capital_ramp import LiveCapital
from trader.engine.forecasting import InlineExecutor
from trader.engine.planning import live_capital
from trader.forecast.build import ModelUnavailable
from trader.forecast.protocol import Forecaster
from trader.market.replay import Recording
from trader.market.replay_calendars import replay_calendars
from trader.runner import forecasters_for, model_names, replay_settings, run_replay, tick_times
from trader.shortfall.forecasts import LedgerForecaster
from trader.shortfall.read import LedgerRecord

ONE_US = timedelta(microseconds=1)


class NotReplayable(Exception):
    """The ledger lacks what a replay needs: the message says what, first."""


@dataclass(frozen=True)
class Stretch:
    """A part of the period run with one set of settings (a daemon start's)."""

    begin: datetime  # its first tick
    end: datetime  # its last, inclusive
    settings: Settings
    digest: str | None  # the recorded settings' digest (None: no record, the given ones)
    overridden: list[tuple[str, Any, Any]]  # (key, recorded, used) where the user overrode
    # The share of equity a live daemon's sizing used (`broker.live_capital_fraction` and its
    # ramp): the replay runs on the paper broker, whose planner would size from all of it.
    capital: LiveCapital | None = None


@dataclass
class ReplayResult:
    ledger: Path
    stretches: list[Stretch]
    ticks: int = 0
    served: int = 0  # forecasts served from the daemon's ledger
    missing: dict[str, int] = field(default_factory=dict)  # requests it had none for
    # forecasts the model made anew, where the daemon forecast nothing from that bar (down)
    computed: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def recordings_of(record: LedgerRecord) -> dict[str, Recording]:
    """The bars the daemon stored, as the recordings a replay reads."""
    if not record.bars:
        raise NotReplayable(f"ledger {record.path} holds no bars: nothing to replay on")
    return {
        symbol: Recording(symbol, Timeframe(record.timeframes[symbol]), list(rows), record.path)
        for symbol, rows in record.bars.items()
    }


def _with_overrides(
    recorded: Mapping[str, Any], overrides: Mapping[str, Any]
) -> tuple[Settings, list[tuple[str, Any, Any]]]:
    """The settings to replay with, and where they differ from the recorded ones (compared
    as recorded again: an override of 10 for a recorded "10" is no difference)."""
    unknown = sorted(set(overrides) - set(recorded))
    if unknown:
        raise NotReplayable(f"no such setting to override: {', '.join(unknown)}")
    try:
        settings = settings_from_record(dict(recorded) | dict(overrides))
    except ValueError as error:
        raise NotReplayable(f"the settings are refused: {error}") from error
    return settings, differences(recorded, recorded_settings(settings))


def _replayable(settings: Settings, record: LedgerRecord, ledger: Path) -> Settings:
    """`settings` as the replay runs them: on the paper broker with the daemon's account,
    writing to the replay's own ledger."""
    broker = settings.broker.model_copy(
        update={
            "mode": "paper",
            "live_confirmation": False,
            "currency": record.currency,
            "starting_cash": record.starting_cash,
        }
    )
    ledger_settings = settings.ledger.model_copy(update={"path": ledger})
    # The replay ticks at the daemon's times, a settle delay after the bar close, on quotes
    # modelled at that close: they are as old as the delay, where the daemon's real ones were
    # fresh (an hour bar's delay on a sandbox's fast clock is minutes, past the 30 s default).
    market = settings.market.model_copy(
        update={
            "max_quote_age_s": settings.market.max_quote_age_s + settings.schedule.settle_delay_s
        }
    )
    updated = settings.model_copy(
        update={"broker": broker, "ledger": ledger_settings, "market": market}
    )
    return type(settings).model_validate(updated.model_dump())


def stretches(
    record: LedgerRecord,
    given: Settings,
    overrides: Mapping[str, Any],
    ledger: Path,
) -> list[Stretch]:
    """One stretch per daemon start (the settings it recorded, with `overrides`); a ledger
    that recorded none (older than schema 10) is one stretch with the `given` settings."""
    if not record.runs:
        used, overridden = _with_overrides(recorded_settings(given), overrides)
        settings = _replayable(used, record, ledger)
        return [
            Stretch(record.ticks[0].at, record.ticks[-1].at, settings, None, overridden,
                    live_capital(used))
        ]  # fmt: skip
    out = []
    runs = record.runs
    for i, run in enumerate(runs):
        recorded = record.settings.get(run.settings_digest)
        if recorded is None:
            raise NotReplayable(f"run {run.id}'s settings ({run.settings_digest[:12]}) are missing")
        settings, overridden = _with_overrides(recorded, overrides)
        # From the daemon's first tick to its last: a tick before or after them the daemon
        # never ran would trade the replay's account away from the daemon's.
        begin = record.ticks[0].at if i == 0 else run.started_at
        end = runs[i + 1].started_at - ONE_US if i + 1 < len(runs) else record.ticks[-1].at
        out.append(
            Stretch(begin, end, _replayable(settings, record, ledger), run.settings_digest,
                    overridden, live_capital(settings))
        )  # fmt: skip
    return out


async def replay(
    record: LedgerRecord,
    given: Settings,
    overrides: Mapping[str, Any],
    ledger: Path,
) -> ReplayResult:
    """The daemon's period replayed into a new ledger at `ledger` (which must not exist)."""
    if ledger.exists():  # noqa: ASYNC240 - once, before anything runs
        raise NotReplayable(f"{ledger} exists: the replay writes a new ledger")
    recordings = recordings_of(record)
    parts = stretches(record, given, overrides, ledger)
    first, earliest = record.ticks[0].at, first_replayable(recordings, parts[0])
    if earliest is None or earliest > first:
        context = parts[0].settings.market.context_bars
        window = (
            f"the first full window of {context} bars closes at {earliest.isoformat()}"
            if earliest is not None
            else f"they do not fill a window of {context} bars (market.context_bars)"
        )
        raise NotReplayable(
            f"the stored bars cannot replay the daemon's first tick {first.isoformat()} "
            f"({window}): bars older than ledger.bar_retention_days were dropped, and a "
            "replay that starts later starts from another account"
        )
    result = ReplayResult(ledger, parts)
    times = replay_ticks(record, recordings, parts[0])
    forecasters: dict[str, LedgerForecaster] = {}
    for stretch in parts:
        settings = replay_settings(stretch.settings, recordings)
        timeframe = Timeframe(settings.market.timeframe)
        models = [
            forecasters.setdefault(
                m,
                LedgerForecaster(
                    m, record.forecasts, timeframe, _model_of(settings, m, result.notes)
                ),
            )
            for m in model_names(settings)
        ]
        calendars = replay_calendars(settings.market, recordings)
        summary = await run_replay(
            settings, recordings, forecasters=models, begin=stretch.begin, end=stretch.end,
            durable=False, inference=InlineExecutor(), halt_policy="wait", calendars=calendars,
            ticks=times, capital=stretch.capital,
        )  # fmt: skip
        result.ticks += summary.ticks
    result.served = sum(f.served for f in forecasters.values())
    missing: dict[str, int] = {}
    for f in forecasters.values():
        for symbol, n in f.missing.items():
            missing[symbol] = missing.get(symbol, 0) + n
    result.missing = missing
    computed: dict[str, int] = {}
    for f in forecasters.values():
        for symbol, n in f.computed.items():
            computed[symbol] = computed.get(symbol, 0) + n
    result.computed = computed
    return result


def _model_of(settings: Settings, name: str, notes: list[str]) -> Callable[[], Forecaster | None]:
    """Builds the model `name` as the daemon ran it, when first asked (the ticks the daemon
    did not decide at): None, and a note, where it cannot be had here (its weights or device)."""

    def build() -> Forecaster | None:
        try:
            built = dict(zip(model_names(settings), forecasters_for(settings), strict=True))
        except ModelUnavailable as error:
            notes.append(
                f"the model {name} could not run for the ticks the daemon did not decide at "
                f"({error}): the replay shows no trade there"
            )
            return None
        return built[name]

    return build


def first_replayable(recordings: Mapping[str, Recording], stretch: Stretch) -> datetime | None:
    """The first tick the replay can run: the first full window of every symbol."""
    settings = replay_settings(stretch.settings, recordings)
    calendars = replay_calendars(settings.market, recordings)
    times = tick_times(calendars.recordings, settings.market.context_bars, calendars.calendars)
    return times[0] if times else None


def replay_ticks(
    record: LedgerRecord, recordings: Mapping[str, Recording], stretch: Stretch
) -> list[datetime]:
    """The daemon's own tick times (a live daemon's fall a settle delay after the bar close:
    the same times give the same client order ids), and the bar closes it never ticked for
    (down, or skipped past late), at which the replay shows what the model would have done."""
    settings = replay_settings(stretch.settings, recordings)
    calendars = replay_calendars(settings.market, recordings)
    closes = tick_times(calendars.recordings, settings.market.context_bars, calendars.calendars)
    ran = sorted(t.at for t in record.ticks)
    uncovered = []
    for i, close in enumerate(closes):
        following = closes[i + 1] if i + 1 < len(closes) else None
        j = bisect_left(ran, close)
        if j == len(ran) or (following is not None and ran[j] >= following):
            uncovered.append(close)
    return sorted(set(ran) | set(uncovered))
