"""A backtest's ledger written by its writer process, chunk after chunk, while the run goes on:
the same rows in the same order as one transaction at the end, and a writer that cannot write
fails the run with its reason, never hangs it nor outlives it."""

from __future__ import annotations

import os
import signal
import sqlite3
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_trading_ledger import AT, record
from trader.domain import Fill, Liquidity, Order, OrderStatus, OrderType, Portfolio, Side
from trader.domain.execution import Execution
from trader.ledger import buffered
from trader.ledger.buffered import BufferedDatabase
from trader.ledger.database import LedgerError
from trader.ledger.trading import TradingLedger
from trader.risk import TradingState, TradingStatus

pytestmark = pytest.mark.integration


def rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows in their stored order (rowid order, where the table has one)."""
    with sqlite3.connect(path) as c:
        tables = [t for (t,) in c.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: c.execute(f"SELECT * FROM {t}").fetchall() for t in tables}  # noqa: S608 - names from sqlite_master


def children() -> set[int]:
    """This process's child processes (any thread's)."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*"):
        found |= {int(pid) for pid in (task / "children").read_text().split()}
    return found


async def trade(path: Path, ticks: int) -> None:
    """A run's ledger: each tick sends an order, fills the one sent a tick before (so an
    order's rows span two ticks, and with small chunks two chunks), and books its record."""
    database = await BufferedDatabase.open(path)
    ledger = TradingLedger(database)
    await ledger.open("USDT", Decimal(10_000))
    portfolio = Portfolio("USDT", Decimal(10_000))
    sent: Order | None = None
    for i in range(ticks):
        at = AT + timedelta(hours=i)
        executions = []
        if sent is not None:
            fill = Fill(
                f"{sent.client_order_id}-1", sent.client_order_id, "SOL/USDT", Side.BUY,
                Decimal("100"), Decimal(1), Decimal("0.1"), "USDT", Liquidity.TAKER, at,
            )  # fmt: skip
            portfolio = portfolio.apply(fill)
            executions.append(Execution(sent.with_fill(fill), (fill,)))
        sent = Order.create(
            strategy="simple", symbol="SOL/USDT", side=Side.BUY, type=OrderType.MARKET,
            amount=Decimal(1), limit_price=None, tick_time=at, leg="market",
        ).transition(OrderStatus.SUBMITTED)  # fmt: skip
        executions.append(Execution(sent, ()))
        status = TradingStatus(TradingState.ACTIVE, f"tick {i}", at)
        tick = replace(record(status, portfolio.cash), at=at)
        await ledger.commit_tick(executions, portfolio, {"SOL/USDT": at}, tick, status)
    await database.close()


async def test_the_writer_writes_the_rows_of_one_transaction_at_the_end(tmp_path, monkeypatch):
    await trade(tmp_path / "once.sqlite3", 40)
    started, _Writer.chunks = [], 0
    monkeypatch.setattr(buffered, "CHUNK_ROWS", 7)
    monkeypatch.setattr(
        buffered, "WriterProcess", lambda path: started.append(path) or _Writer(path)
    )
    await trade(tmp_path / "chunks.sqlite3", 40)
    assert len(started) == 1
    assert _Writer.chunks > 20  # most of the run went through the writer, in many chunks
    once, chunks = rows(tmp_path / "once.sqlite3"), rows(tmp_path / "chunks.sqlite3")
    assert len(once["orders"]) == 40
    assert len(once["fills"]) == 39
    assert chunks == once


class _Writer(buffered.WriterProcess):
    chunks = 0

    def send(self, chunk: buffered.Chunk) -> None:
        _Writer.chunks += 1
        super().send(chunk)


async def test_a_statement_the_file_refuses_fails_the_run_with_the_writers_reason(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(buffered, "CHUNK_ROWS", 1)
    before = children()
    database = await BufferedDatabase.open(tmp_path / "ledger.sqlite3")
    # A fill of an order the ledger does not hold: its foreign key refuses it.
    await database.write(
        lambda c: c.execute(
            "INSERT INTO fills VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ("f1", "no-such-order", "SOL/USDT", "buy", "1", "1", "0", "USDT", "taker", "t"),
        )
    )
    with pytest.raises(LedgerError, match="FOREIGN KEY constraint failed"):
        await database.run(lambda c: c.execute("SELECT count(*) FROM fills").fetchone())
    await database.close()
    assert children() <= before  # the writer has ended


async def test_a_writer_that_is_killed_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(buffered, "CHUNK_ROWS", 1)
    before = children()
    database = await BufferedDatabase.open(tmp_path / "ledger.sqlite3")
    await move_cursor(database, "SOL/USDT")
    (writer,) = children() - before
    os.kill(writer, signal.SIGKILL)
    await move_cursor(database, "ETH/USDT")  # sent to a writer that is gone: no error yet
    with pytest.raises(LedgerError, match="writer ended with code -9"):
        await database.close()
    assert children() <= before


async def move_cursor(database: BufferedDatabase, symbol: str) -> None:
    await database.write(
        lambda c: c.execute("INSERT INTO market_cursor VALUES (?, 't')", (symbol,))
    )


async def test_a_ledger_closed_before_it_is_read_waits_for_its_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(buffered, "CHUNK_ROWS", 5)
    path = tmp_path / "ledger.sqlite3"
    before = children()
    await trade(path, 12)
    assert children() <= before
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT count(*) FROM ticks").fetchone() == (12,)


async def test_a_value_no_column_takes_fails_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(buffered, "CHUNK_ROWS", 1)
    before = children()
    database = await BufferedDatabase.open(tmp_path / "ledger.sqlite3")
    await database.write(  # a Decimal, where the ledger keeps money as text
        lambda c: c.execute("INSERT INTO market_cursor VALUES (?, ?)", ("SOL/USDT", Decimal(1)))
    )
    with pytest.raises(LedgerError, match="could not be sent: unmarshallable object"):
        await database.close()
    assert children() <= before
