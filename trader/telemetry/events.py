"""MQTT events: topics under `<prefix>/<instance>/` and their JSON bodies.

Every body carries `schema` (the event's name and version, e.g. "trader.fill/1"), the
instance and the time it describes. Money is written as exact decimal strings. A symbol in a
topic is written with '-' for '/' (SOL/USDT -> forecast/SOL-USDT), so that one topic level is
one symbol and `forecast/+` matches them all.

Topics: status (retained; the broker publishes the last will "offline" there), heartbeat,
forecast/<symbol>, forecast_score/<symbol> (a forecast scored once its horizon closed),
decision, order, fill, pnl, cmd (operator commands in) and cmd/result.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from trader.domain import DomainError, Fill, Forecast, Order, Signal, from_epoch_ms
from trader.engine.report import TickReport
from trader.skill.live import LiveScore, WindowFigures

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Event:
    topic: str  # relative to <prefix>/<instance>/
    body: dict[str, Any]
    retain: bool = False
    qos: int = 1

    def payload(self) -> bytes:
        return json.dumps(self.body, separators=(",", ":"), default=str).encode()


def topic_symbol(symbol: str) -> str:
    return symbol.replace("/", "-")


def _decimal(value: Decimal | None) -> str | None:
    return None if value is None else format(value, "f")


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def make(kind: str, instance: str, at: datetime, **fields: Any) -> dict[str, Any]:
    head = {"schema": f"trader.{kind}/{SCHEMA_VERSION}", "instance": instance, "at": _time(at)}
    return head | fields


def status(instance: str, at: datetime, state: str, **fields: Any) -> Event:
    """`state`: starting, ready, stopping, offline (the will says offline too)."""
    return Event("status", make("status", instance, at, state=state, **fields), retain=True)


def offline_will(instance: str) -> Event:
    """Published by the broker for us when the connection dies without a goodbye."""
    body = {
        "schema": f"trader.status/{SCHEMA_VERSION}",
        "instance": instance,
        "at": None,
        "state": "offline",
        "reason": "connection lost",
    }
    return Event("status", body, retain=True)


def heartbeat(instance: str, at: datetime, **fields: Any) -> Event:
    return Event("heartbeat", make("heartbeat", instance, at, **fields), qos=0)


def forecast(instance: str, tick: datetime, f: Forecast) -> Event:
    quantiles = {
        field: {str(level): list(path) for level, path in levels.items()}
        for field, levels in f.quantiles.items()
    }
    body = make(
        "forecast", instance, tick, symbol=f.symbol, model=f.model, as_of=_time(f.as_of),
        timeframe=str(f.timeframe), horizon=f.steps, quantiles=quantiles,
        mean={field: list(path) for field, path in f.mean.items()},
    )  # fmt: skip
    return Event(f"forecast/{topic_symbol(f.symbol)}", body)


def forecast_score(
    instance: str, tick: datetime, score: LiveScore, window: WindowFigures, naive: WindowFigures
) -> Event:
    """One forecast's own figures over its steps, and its model's over the skill window."""

    def ratio(name: str) -> float | None:
        top, bottom = score.sums.get(name, (0.0, 0.0))
        return top / bottom if bottom > 0 else None

    skill = ratio("skill")
    body = make(
        "forecast_score", instance, tick, symbol=score.symbol, model=score.model,
        as_of=_time(from_epoch_ms(score.as_of_ms)), horizon=score.steps, crps=ratio("crps"),
        crps_naive=ratio("crps_naive"), mase=ratio("mase"),
        skill_vs_naive=None if skill is None else 1.0 - skill,
        coverage={c[len("coverage_"):]: ratio(c) for c in score.sums if c.startswith("coverage_")},
        window={"forecasts": window.forecasts, "crps": window.crps, "mase": window.mase,
                "skill_vs_naive": window.skill_vs_naive, "coverage": dict(window.coverage),
                "crps_naive": naive.crps},
    )  # fmt: skip
    return Event(f"forecast_score/{topic_symbol(score.symbol)}", body)


def decision(instance: str, tick: datetime, s: Signal) -> Event:
    body = make(
        "decision", instance, tick, symbol=s.symbol, strategy=s.strategy,
        direction=s.direction.value, reason=s.reason, inputs=dict(s.inputs),
    )  # fmt: skip
    return Event("decision", body)


def order(instance: str, tick: datetime, o: Order) -> Event:
    body = make(
        "order", instance, tick, client_order_id=o.client_order_id, strategy=o.strategy,
        symbol=o.symbol, side=o.side.value, type=o.type.value, amount=_decimal(o.amount),
        limit_price=_decimal(o.limit_price), status=o.status.value,
        filled_amount=_decimal(o.filled_amount), created_at=_time(o.created_at),
        expires_at=_time(o.expires_at), exchange_order_id=o.exchange_order_id,
    )  # fmt: skip
    return Event("order", body)


def fill(instance: str, tick: datetime, f: Fill) -> Event:
    body = make(
        "fill", instance, tick, fill_id=f.fill_id, client_order_id=f.client_order_id,
        symbol=f.symbol, side=f.side.value, price=_decimal(f.price), amount=_decimal(f.amount),
        fee=_decimal(f.fee), fee_currency=f.fee_currency, liquidity=f.liquidity.value,
        filled_at=_time(f.at),
    )  # fmt: skip
    return Event("fill", body)


def pnl(
    instance: str,
    at: datetime,
    *,
    equity: Decimal,
    cash: Decimal,
    fees_paid: Decimal,
    drawdown: float | None,
    positions: Mapping[str, Decimal],
    realized: Mapping[str, Decimal],
    unrealized: Mapping[str, Decimal] | None,
    source: str,
) -> Event:
    """`source`: "tick" (booked by a tick) or "snapshot" (marked between ticks)."""
    body = make(
        "pnl", instance, at, source=source, equity=_decimal(equity), cash=_decimal(cash),
        fees_paid=_decimal(fees_paid), drawdown=drawdown,
        positions={s: _decimal(v) for s, v in positions.items()},
        realized={s: _decimal(v) for s, v in realized.items()},
        unrealized=None if unrealized is None else {s: _decimal(v) for s, v in unrealized.items()},
    )  # fmt: skip
    return Event("pnl", body)


def command_result(instance: str, at: datetime, command: str, result: str, reason: str) -> Event:
    body = make("command_result", instance, at, command=command, result=result, reason=reason)
    return Event("cmd/result", body)


def tick_events(instance: str, report: TickReport) -> Iterator[Event]:
    """A tick's events in the order things happened: forecasts, decisions, orders, fills,
    then the P&L it booked."""
    at = report.at
    for prediction in report.forecasts:
        yield forecast(instance, at, prediction)
    for signal in report.decisions:
        yield decision(instance, at, signal)
    for change in report.orders:
        yield order(instance, at, change)
    for execution in report.fills:
        yield fill(instance, at, execution)
    portfolio = report.portfolio
    if portfolio is not None:
        try:
            unrealized: dict[str, Decimal] | None = portfolio.unrealized_pnl(report.marks)
        except DomainError:  # a position without a mark: say unknown rather than guess
            unrealized = None
        yield pnl(
            instance, at, equity=report.equity, cash=portfolio.cash,
            fees_paid=portfolio.fees_paid, drawdown=report.drawdown,
            positions={s: p.amount for s, p in portfolio.positions.items()},
            realized=dict(portfolio.realized_pnl), unrealized=unrealized, source="tick",
        )  # fmt: skip
