"""The daemon's live skill: after each tick, every forecast whose horizon's bars have all
closed is scored (`trader.skill`) against them, beside the naive reference, and the score kept
in the ledger. What waits is read back from the ledger at start-up, and a score is written at
most once (the ledger's key), so a restart loses nothing and scores nothing twice.

The naive reference is the baseline forecaster's own code (`BaselineForecaster` with
`forecast.naive_window`) run, once the horizon has closed, on the window's bars up to the
forecast's origin: the bars the forecast was made from whenever the window keeps
`naive_window` + twice the horizon of them (the default context does), so that the baseline
at the same lookback scores 0; and the same bars after a restart as in a run never
interrupted. A forecast with too little history left before its origin for the reference
(fewer than the horizon + 8 bars) cannot be scored and counts as `expired`.

Step k of a forecast is the k-th bar the symbol's calendar expects after its origin. A
forecast whose horizon had a bar missing is recorded as `gap`; one whose origin bar left the
window before its horizon closed (a long outage) as `expired`: both are counted, neither
scored. The tick's forecasts are also checked for stability: models that failed to give one
(non-finite output refused, or an error), forecasts at a clip bound, the spread of the
predicted distribution against the window's realised volatility, and jumps of the median
between ticks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from datetime import datetime

from trader.domain import Bar, Forecast, to_epoch_ms
from trader.engine.report import TickReport
from trader.forecast.baseline import BaselineForecaster
from trader.forecast.protocol import ForecastRequest
from trader.ledger.scores import ScoreRow, ScoreStore
from trader.market.step import MarketDataStep
from trader.skill.live import (
    EXPIRED,
    GAP,
    NAIVE,
    SCORED,
    LiveScore,
    RollingSkill,
    SkillUpdate,
    Stability,
    bar_volatility,
    clipped,
    jump_sigmas,
    median_return,
    score_one,
    spread_ratio,
)


class LiveSkill:
    def __init__(
        self,
        store: ScoreStore,
        market: MarketDataStep,
        models: Sequence[str],
        *,
        window: int,
        jump_limit: float,
        naive_window: int,
    ) -> None:
        self.store = store
        self.market = market
        self.models = list(models)  # the naive series follows the first one's origins
        self.rolling = RollingSkill(window)
        self.jump_limit = jump_limit
        self.naive = BaselineForecaster(naive_window)
        self._pending: dict[tuple[str, str, int], Forecast] = {}
        self._medians: dict[tuple[str, str], float] = {}

    async def start(self, now: datetime) -> SkillUpdate:
        """The rolling windows from the ledger's latest scores, and the forecasts still
        waiting for their horizon (made recently enough for their origin to be in the window)."""
        for row in await self.store.latest(self.rolling.window, SCORED):
            self.rolling.add(row.model, row.symbol, _pairs(row.sums))
            if row.model == self.models[0]:
                self.rolling.add(NAIVE, row.symbol, _pairs(row.naive))
        # Older forecasts' origins have left the window (a stock's bars come a sixth of the
        # day at most, and a window holds context_bars of them): they could only expire.
        span = self.market.timeframe.duration * (self.market.settings.context_bars * 14)
        for forecast in await self.store.pending(now - span, self.market.timeframe):
            self._wait(forecast)
        return SkillUpdate(touched=set(self.rolling.keys()))

    def _wait(self, forecast: Forecast) -> None:
        key = (forecast.model, forecast.symbol, to_epoch_ms(forecast.as_of))
        self._pending.setdefault(key, forecast)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def after_tick(self, report: TickReport) -> SkillUpdate:
        update = SkillUpdate(stability=self._stability(report))
        for forecast in report.forecasts:
            self._wait(forecast)
        rows: list[ScoreRow] = []
        done: list[tuple[str, str, int]] = []
        for key, forecast in sorted(self._pending.items(), key=lambda item: item[0][2]):
            verdict = self._judge(forecast)
            if verdict is None:
                continue
            done.append(key)
            outcome, sums, naive = verdict
            rows.append(ScoreRow(
                forecast.symbol, forecast.model, forecast.as_of, report.at, forecast.steps,
                outcome, sums, naive,
            ))  # fmt: skip
        for key in done:
            del self._pending[key]
        for row, new in zip(rows, await self.store.record(rows), strict=True):
            if not new:
                continue  # scored before a restart: counted then
            if row.outcome != SCORED:
                update.unscored.append((row.model, row.symbol, row.outcome))
                continue
            sums, naive = _pairs(row.sums), _pairs(row.naive)
            self.rolling.add(row.model, row.symbol, sums)
            update.touched.add((row.model, row.symbol))
            if row.model == self.models[0]:
                self.rolling.add(NAIVE, row.symbol, naive)
                update.touched.add((NAIVE, row.symbol))
            update.scores.append(LiveScore(
                row.model, row.symbol, to_epoch_ms(row.as_of), row.steps, sums, naive
            ))  # fmt: skip
        return update

    def _judge(
        self, forecast: Forecast
    ) -> tuple[str, Mapping[str, tuple[float, float]], Mapping[str, tuple[float, float]]] | None:
        """The forecast's outcome once its horizon has closed; None while it has not."""
        window = self.market.windows.get(forecast.symbol)
        if window is None:
            return EXPIRED, {}, {}
        bars = window.snapshot()
        origin = next((i for i, b in enumerate(bars) if b.end == forecast.as_of), None)
        if origin is None:
            newest = bars[-1].end if bars else None
            if newest is not None and newest > forecast.as_of:
                return EXPIRED, {}, {}  # the origin bar has left the window
            return None
        after = bars[origin + 1 : origin + 1 + forecast.steps]
        if not self._joined(forecast.symbol, bars[origin : origin + 1 + len(after)]):
            return GAP, {}, {}
        if len(after) < forecast.steps:
            return None
        return self._score(forecast, bars[: origin + 1], after)

    def _score(
        self, forecast: Forecast, history: Sequence[Bar], after: Sequence[Bar]
    ) -> tuple[str, Mapping[str, tuple[float, float]], Mapping[str, tuple[float, float]]]:
        """The closed horizon `after`, scored beside the naive reference made from
        `history` (the window's bars up to the origin); expired when none can be made."""
        request = ForecastRequest(forecast.symbol, history, forecast.steps, forecast.levels)
        try:
            (reference,) = self.naive.forecast([request])
        except ValueError:  # fewer than the horizon + 8 bars: it can never be scored
            return EXPIRED, {}, {}
        sums, naive = score_one(forecast, reference, history[-1].close, [b.close for b in after])
        return SCORED, sums, naive

    def _joined(self, symbol: str, bars: Sequence[Bar]) -> bool:
        calendar = self.market.calendars[symbol]
        timeframe = self.market.timeframe
        return all(
            calendar.missing_between(timeframe, to_epoch_ms(a.start), to_epoch_ms(b.start)) == 0
            for a, b in itertools.pairwise(bars)
        )

    def _stability(self, report: TickReport) -> list[Stability]:
        out = []
        for model in self.models:
            mine = {f.symbol: f for f in report.forecasts if f.model == model}
            clips, ratios, jumps = [], {}, []
            for symbol, forecast in mine.items():
                window = self.market.windows.get(symbol)
                closes = [b.close for b in window.snapshot()] if window is not None else []
                if not closes:
                    continue
                last = closes[-1]
                if clipped(forecast, closes):
                    clips.append(symbol)
                ratio = spread_ratio(forecast, last, closes)
                if ratio is not None:
                    ratios[symbol] = ratio
                median, sigma = median_return(forecast, last), bar_volatility(closes)
                before = self._medians.get((model, symbol))
                self._medians[model, symbol] = median
                if (
                    before is not None
                    and sigma is not None
                    and jump_sigmas(before, median, sigma, forecast.steps) > self.jump_limit
                ):
                    jumps.append(symbol)
            asked = len(report.ready)
            out.append(Stability(model, asked, max(0, asked - len(mine)), clips, ratios, jumps))
        return out


def _pairs(sums: Mapping[str, Sequence[float]]) -> dict[str, tuple[float, float]]:
    return {k: (float(v[0]), float(v[1])) for k, v in sums.items()}
