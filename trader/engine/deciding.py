"""The tick's strategy stage: each ready symbol's strategy turns the forecasts into a decision (a
signal, and how to trade it), logged as one line with its reason. A symbol without the primary
model's forecast, or whose strategy raises, is skipped for the tick; the others go on."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime

from structlog.typing import FilteringBoundLogger

from trader.config.trading_settings import StrategySettings
from trader.domain import Forecast, Signal, from_epoch_ms, to_epoch_ms
from trader.engine.account import Account
from trader.engine.report import TickReport
from trader.forecast.protocol import Forecaster
from trader.market.calendars.calendar import CalendarRangeError
from trader.market.step import MarketDataStep, SymbolData, TickData
from trader.strategy.base import Costs, Decision, DecisionContext, Strategy


class Deciding:
    def __init__(
        self,
        market: MarketDataStep,
        account: Account,
        forecasters: Sequence[Forecaster],
        costs: Costs,
        log: FilteringBoundLogger,
    ) -> None:
        self._market = market
        self._account = account
        self._forecasters = forecasters  # the first is the primary model
        self._costs = costs
        self._log = log

    async def run(
        self,
        data: TickData,
        forecasts: Mapping[str, Mapping[str, Forecast]],
        at: datetime,
        report: TickReport,
        strategies: Mapping[str, Strategy],
        settings: StrategySettings,
    ) -> dict[str, Decision]:
        """The decisions, by symbol."""
        primary = forecasts.get(self._forecasters[0].name, {})
        decisions = {}
        for symbol, symbol_data in data.ready.items():
            if symbol not in primary:
                report.skipped[symbol] = "no_forecast"
                continue
            context = DecisionContext(
                symbol, at, symbol_data.bars, symbol_data.quote, primary[symbol],
                {m: f[symbol] for m, f in forecasts.items() if symbol in f},
                self._account.portfolio.amount(symbol), self._costs, settings.allow_short,
                self._horizon_end(symbol_data, primary[symbol].steps),
            )  # fmt: skip
            strategy = strategies[symbol]
            try:
                decision = strategy.decide(context)
            except Exception:
                self._log.exception("strategy failed", symbol=symbol, strategy=strategy.name)
                report.skipped[symbol] = "strategy_error"
                continue
            signal = decision.signal
            if self._log.is_enabled_for(logging.INFO):  # a backtest logs warnings only
                log_decision(self._log, signal)
            report.decisions.append(signal)
            decisions[symbol] = decision
        return decisions

    def _horizon_end(self, data: SymbolData, steps: int) -> datetime | None:
        """The close of the `steps`-th bar the symbol's market expects after its newest; None
        past the calendar's known sessions (the strategy then counts hours)."""
        calendar = self._market.calendars[data.symbol]
        after = to_epoch_ms(data.bars[-1].end)
        try:
            return from_epoch_ms(calendar.bar_end_after(self._market.timeframe, after, steps))
        except CalendarRangeError:
            return None


def log_decision(log: FilteringBoundLogger, signal: Signal) -> None:
    log.info(
        "decision", symbol=signal.symbol, strategy=signal.strategy,
        direction=str(signal.direction), reason=signal.reason, **dict(signal.inputs),
    )  # fmt: skip
