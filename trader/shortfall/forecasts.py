"""The daemon's own forecasts, served to the replay's engine as a forecaster: read from the
ledger, never recomputed, so a decision that differs cannot be blamed on the model.

A request is answered with the forecast the daemon stored for that symbol and model from the
same last bar (its `as_of`, the close of the window's newest bar). Where the daemon stored none
(it skipped the symbol, or its model failed at that tick) the engine gets nothing for the
symbol, as the daemon did, and the miss is counted. Where the daemon forecast nothing at all
from that bar (it was down, or the exchange was: a tick it missed or ran skipping every symbol),
there is nothing to read: `compute` then gives the model itself, as the daemon ran it, to show
what it would have done at that tick (the skipped ticks' part); such forecasts are counted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from types import MappingProxyType

from trader.domain import Forecast, Timeframe
from trader.forecast.protocol import CompileStats, Forecaster, ForecastRequest
from trader.ledger.codec import time_text
from trader.ledger.forecast_rows import read_forecast
from trader.shortfall.read import Row


class LedgerForecaster:
    """One model's stored forecasts, by symbol and `as_of`."""

    def __init__(
        self,
        model: str,
        rows: Sequence[Row],
        timeframe: Timeframe,
        compute: Callable[[], Forecaster | None] | None = None,
    ) -> None:
        self.name = model
        self._timeframe = timeframe
        # (symbol, as_of text) -> the row without its tick; a forecast is stored once per
        # tick, so the same window forecast at two ticks (a re-run) keeps the last.
        self._rows = {(r[1], r[3]): r[1:] for r in rows if r[2] == model}
        self._decided = {r[3] for r in rows}  # the bars from which the daemon forecast at all
        self._compute = compute
        self._model: Forecaster | None = None
        self.served = 0
        self.missing: Counter[str] = Counter()  # by symbol
        self.computed: Counter[str] = Counter()  # by symbol: where the daemon forecast nothing
        self._compile = CompileStats()

    @property
    def mode(self) -> str:
        return "ledger"

    @property
    def compile_stats(self) -> CompileStats:
        return self._compile

    def stored(self, symbol: str, as_of: datetime) -> Forecast | None:
        row = self._rows.get((symbol, time_text(as_of)))
        return read_forecast(row, self._timeframe) if row is not None else None

    def forecast(self, requests: Sequence[ForecastRequest]) -> list[Forecast]:
        """One answer per request, in order (the engine pairs them by place): a stored
        forecast; the model's own where the daemon forecast nothing from that bar; or for a
        miss one the engine drops as unusable (no steps)."""
        out: list[Forecast | None] = []
        undecided: list[int] = []
        for request in requests:
            found = self.stored(request.symbol, request.bars[-1].end) if request.bars else None
            if found is not None and found.steps == request.horizon:
                self.served += 1
                out.append(found)
                continue
            if request.bars and time_text(request.bars[-1].end) not in self._decided:
                undecided.append(len(out))
                out.append(None)
                continue
            self.missing[request.symbol] += 1
            out.append(_nothing(request, self.name, self._timeframe))
        model = self._computing() if undecided else None
        if model is not None:
            answers = model.forecast([requests[i] for i in undecided])
            for i, answer in zip(undecided, answers, strict=True):
                self.computed[requests[i].symbol] += 1
                out[i] = answer
        else:
            for i in undecided:
                self.missing[requests[i].symbol] += 1
                out[i] = _nothing(requests[i], self.name, self._timeframe)
        return [f for f in out if f is not None]

    def _computing(self) -> Forecaster | None:
        """The model itself, built once when first needed (None: not to be had)."""
        if self._model is None and self._compute is not None:
            self._model, self._compute = self._compute(), None
        return self._model


def _nothing(request: ForecastRequest, model: str, timeframe: Timeframe) -> Forecast:
    """A forecast of no steps: the engine keeps only answers of the horizon asked for."""
    as_of = request.bars[-1].end if request.bars else datetime.fromtimestamp(0).astimezone()
    return Forecast.unchecked(
        request.symbol, model, as_of, timeframe, 0, MappingProxyType({}), MappingProxyType({})
    )
