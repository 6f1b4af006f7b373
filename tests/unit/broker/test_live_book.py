"""The live broker's open orders: what is open, what was recorded before a restart (looked up
once), and the window in which an order sent without an answer may still arrive."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from trader.broker.live.book import OpenOrders
from trader.domain import Order, OrderStatus, OrderType, Side

AT = datetime(2024, 3, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def order(leg: str, *path: OrderStatus) -> Order:
    o = Order.create(
        strategy="t", symbol="SOL/USDT", side=Side.BUY, type=OrderType.LIMIT,
        amount=Decimal(10), limit_price=Decimal(3), tick_time=AT, leg=leg,
    )  # fmt: skip
    for status in path:
        o = o.transition(status)
    return o


def test_restore_keeps_the_orders_not_ended_and_remembers_the_recorded_ones_once():
    book = OpenOrders(Clock(), recv_window_ms=1000)
    pending = order("p")
    sent = order("s", OrderStatus.SUBMITTED)
    resting = order("r", OrderStatus.SUBMITTED, OrderStatus.OPEN)
    ended = order("e", OrderStatus.SUBMITTED, OrderStatus.REJECTED)
    book.restore([pending, sent, resting, ended])
    assert book.all() == [sent, resting]
    assert book.take_recorded(pending)
    assert not book.take_recorded(pending)  # looked up once, then it is ours to decide
    assert not book.take_recorded(sent)


def test_an_order_that_ends_leaves_and_its_latest_state_is_what_was_tracked():
    book = OpenOrders(Clock(), recv_window_ms=1000)
    sent = order("a", OrderStatus.SUBMITTED)
    book.track(sent)
    resting = sent.transition(OrderStatus.OPEN)
    book.track(resting)
    assert book.latest(sent) == resting
    assert book.get(sent) == resting
    gone = resting.transition(OrderStatus.CANCELED)
    book.track(gone)
    assert book.all() == []
    assert book.get(sent) is None
    assert book.latest(sent) == sent  # not open here: the caller's own view stands


def test_not_found_is_final_only_once_the_recv_window_and_the_skew_have_passed():
    clock = Clock()
    book = OpenOrders(clock, recv_window_ms=1500)
    assert book.window_s == 2.5
    sent = order("w", OrderStatus.SUBMITTED)
    book.sent_now(sent)
    clock.now += 2.4
    assert not book.window_passed(sent)
    clock.now += 0.1
    assert book.window_passed(sent)


def test_an_order_with_no_window_starts_one_when_first_not_found():
    clock = Clock()
    book = OpenOrders(clock, recv_window_ms=1000)
    lost = order("n", OrderStatus.SUBMITTED, OrderStatus.UNKNOWN)
    assert not book.window_passed(lost)
    clock.now += 1.9
    assert not book.window_passed(lost)  # the window started at the first look, not now
    clock.now += 0.1
    assert book.window_passed(lost)


def test_a_restore_gives_orders_without_an_answer_a_window_and_keeps_one_already_running():
    clock = Clock()
    book = OpenOrders(clock, recv_window_ms=1000)
    running = order("k", OrderStatus.SUBMITTED, OrderStatus.UNKNOWN)
    book.track(running)
    book.sent_now(running)
    clock.now += 1.5
    restarted = order("q", OrderStatus.SUBMITTED)
    book.restore([running, restarted])  # a rollback: the same send, still in flight
    clock.now += 0.5
    assert book.window_passed(running)  # 2 s after it was sent
    assert not book.window_passed(restarted)  # 0.5 s after the restore
    clock.now += 1.5
    assert book.window_passed(restarted)


def test_an_ended_order_forgets_its_window():
    clock = Clock()
    book = OpenOrders(clock, recv_window_ms=1000)
    sent = order("f", OrderStatus.SUBMITTED)
    book.sent_now(sent)
    book.track(sent.transition(OrderStatus.REJECTED))
    clock.now += 5
    assert not book.window_passed(sent)  # a new window, from now
