"""The dashboard's panels that judge the daemon in its own time and its markets' sessions (issue
41): the daemon's clock and its speed, the timeframe, the next due tick, each symbol's session,
the calendars' last known sessions and their fallback, and what went wrong in a row.

Every figure is measured against the daemon's clock (`trader_clock_timestamp_seconds`), never
Grafana's or Prometheus's `time()`: a sandbox's accelerated or shifted clock and a replay's
simulated one are judged in their own time. A duration is said in bars of the daemon's own
timeframe where a threshold must hold for 1m and 1d bars alike.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm
from panel_kit import (
    AMBER,
    GREEN,
    RED,
    SYMBOLS,
    query,
    sel,
    stat,
    state_timeline,
    table,
    timeseries,
    value_map,
)

DAY = 86400
CLOCK = f"max({sel('trader_clock_timestamp_seconds')})"
TIMEFRAME = f"max({sel('trader_timeframe_seconds')})"
# 0 before the tick loop starts and after a replay's last tick: no tick is due then.
NEXT_DUE = f"max({sel('trader_next_tick_due_timestamp_seconds')} > 0)"
OVERDUE_S = f"{CLOCK} - {NEXT_DUE}"  # negative while the loop waits for the tick
IN_SESSION = f"max by (symbol) ({sel('trader_market_in_session', SYMBOLS)})"
LAST_SESSION = "trader_calendar_last_session_timestamp_seconds"
FALLBACK = "trader_calendar_fallback"
# Clock as one number: 0 live, 1 a replay running, 2 a replay that has run all its ticks.
CLOCK_KIND = f"max({sel('trader_clock_simulated')}) + max({sel('trader_replay_finished')})"
CLOCK_KIND_MAP = value_map(
    ("0", "LIVE", GREEN), ("1", "SIMULATED", "blue"), ("2", "REPLAY FINISHED", "blue")
)
SESSION_MAP = value_map(("0", "closed", "#808080"), ("1", "in session", GREEN))
FALLBACK_MAP = value_map(
    ("0", "known sessions", GREEN), ("1", "FALLBACK: regular weeks, no holidays", AMBER)
)


def clock_stat() -> Builder[dm.Panel]:
    return stat(
        "Clock",
        "LIVE on the wall clock or a sandbox's venue clock; SIMULATED for `trader run "
        "--replay` (alerts stay quiet); REPLAY FINISHED once the replay has run all its "
        "recorded ticks (a finished replay never pages as down or stale).",
        CLOCK_KIND,
    ).mappings(CLOCK_KIND_MAP)


def status_stats() -> list[Builder[dm.Panel]]:
    """A line of the status row: the schedule, the sessions and the calendars at a glance."""
    return [
        stat(
            "Tick overdue",
            "How far past its scheduled time (bar close + settle delay, on the daemon's clock) "
            "the tick the loop has not finished is, in bars of market.timeframe: 0 while it "
            "waits; it grows while a tick hangs or the scheduler is stuck. Out of session the "
            "next tick is the next session's first close, so a night or a weekend stays 0.",
            f"clamp_min(({OVERDUE_S}) / {TIMEFRAME}, 0)",
            thresholds=[(0.5, AMBER), (1, RED)],
        )
        .unit("suffix: bars")
        .decimals(2),
        stat(
            "Timeframe",
            "The bar length the daemon trades (market.timeframe): one tick per bar close.",
            TIMEFRAME,
        ).unit("s"),
        stat(
            "Clock speed",
            "Venue seconds per wall second: 1 live (also a clock only shifted), the sandbox's "
            "exchange.clock.speed, a replay's --speed; 0: a replay as fast as it can go.",
            f"max({sel('trader_clock_speed')})",
        )
        .unit("suffix:x")
        .mappings(value_map(("0", "AS FAST AS IT GOES", "blue"))),
        stat(
            "Symbols in session",
            "Symbols (of those chosen above) whose market is in a trading interval now, on "
            "each one's calendar at the daemon's clock: crypto always; a stock not at night, "
            "over lunch, a weekend or a holiday.",
            f"count({IN_SESSION} == 1) or vector(0)",
        ),
        stat(
            "Calendar ends in",
            "Time from the daemon's clock to the last session the calendar library knows, for "
            "the calendar that ends first (an alert 30 days before). Past it the daemon trades "
            "the exchange's regular weekly sessions, holidays included.",
            f"min({sel(LAST_SESSION)}) - {CLOCK}",
            thresholds=[(7 * DAY, AMBER), (30 * DAY, GREEN)],
            base=RED,
        ).unit("s"),
        stat(
            "Calendar fallback",
            "Calendars past their last known session, on the exchange's regular weekly "
            "sessions with no holidays: the daemon would tick on a holiday. Upgrade "
            "exchange_calendars.",
            f"count({sel(FALLBACK)} == 1) or vector(0)",
            thresholds=[(1, AMBER)],
        ).mappings(value_map(("0", "none", GREEN))),
        stat(
            "Not OK in a row",
            "Ticks since the last ok tick (degraded, failed or missed ones); 0 after an ok tick.",
            f"max({sel('trader_ticks_not_ok_in_a_row')})",
            thresholds=[(1, AMBER), (3, RED)],
        ),
        stat(
            "Skips in a row",
            "The most ticks in a row one of the chosen symbols skipped for its data (any "
            "reason); 0 once it trades a tick.",
            f"max({sel('trader_symbol_skips_in_a_row', SYMBOLS)})",
            thresholds=[(1, AMBER), (3, RED)],
        ),
    ]


def venue_table() -> Builder[dm.Panel]:
    return table(
        "Venue",
        "Where the daemon trades (trader_exchange_info): venue ccxt or alpaca, and the "
        "exchange (the ccxt id, or alpaca): the settings an authentication alert names.",
        sel("trader_exchange_info"),
    )


def session_panels() -> list[Builder[dm.Panel] | db.Row]:
    """The schedule against the daemon's clock, the sessions and the calendars, over time."""
    days_left = f"min by (calendar) ({sel(LAST_SESSION)}) - scalar({CLOCK})"
    return [
        db.Row("Sessions and schedule"),
        state_timeline(
            "Market in session",
            "Per symbol: in session (a trading interval of its calendar, at the daemon's "
            "clock) or closed (a night, a lunch break, a weekend, a holiday). Staleness alerts "
            "hold only in session.",
            query(IN_SESSION, "{{symbol}}"),
        )
        .mappings(SESSION_MAP)
        .span(12),
        timeseries(
            "Next tick against the daemon's clock",
            "Seconds the tick the loop has not finished is past its scheduled time (negative: "
            "how long until it is due), beside one bar of the timeframe. Above 0 only while a "
            "tick runs; a line rising through one bar is a stuck tick or scheduler.",
            query(OVERDUE_S, "overdue (negative: due in)"),
            query(TIMEFRAME, "one bar"),
            thresholds=[(0, AMBER)],
        ).unit("s"),
        timeseries(
            "Ticks and symbols not OK in a row",
            "Ticks in a row that were not ok (degraded, failed or missed), and per symbol the "
            "ticks in a row it skipped for its data.",
            query(f"max({sel('trader_ticks_not_ok_in_a_row')})", "ticks not ok"),
            query(
                f"max by (symbol) ({sel('trader_symbol_skips_in_a_row', SYMBOLS)})",
                "{{symbol}} skipped",
            ),
            thresholds=[(3, AMBER)],
        ).min(0),
        timeseries(
            "Clock speed",
            "Venue seconds per wall second (1 live; a sandbox's accelerated clock; a replay's "
            "--speed, 0 as fast as it goes).",
            query(f"max({sel('trader_clock_speed')})", "speed"),
        ).min(0),
        timeseries(
            "Calendars: time to the last known session",
            "Per exchange calendar in use (exchange_calendars code; continuous and fx: the "
            "end of the span built so far): time from the daemon's clock to its last known "
            "session close. The alert fires 30 days before.",
            query(days_left, "{{calendar}}"),
        ).unit("s"),
        stat(
            "Calendar fallback by calendar",
            "Each calendar in use: on its known sessions, or past them on the exchange's "
            "regular weekly sessions (no holidays).",
            f"max by (calendar) ({sel(FALLBACK)})",
            thresholds=[(1, AMBER)],
            legend="{{calendar}}",
        )
        .mappings(FALLBACK_MAP)
        .span(12)
        .height(8),
    ]
