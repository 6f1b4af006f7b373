"""The bounded sets the metrics' labels are drawn from, the histograms' buckets, and what a
tick's outcome is to an operator.

No label is named like a target label Prometheus attaches (`job`, `instance`): Prometheus
would rename it `exported_job`, and a rule matching `{job="quotes"}` would match nothing.

A tick's outcome: `ok` traded every symbol; `degraded` ran but skipped a symbol (its data
unavailable, stale, a gap, the exchange away, a strategy error, ...); `failed` had a stage
fail; `missed` never ran (too late). The ledger keeps the engine's own outcome of a tick (did
it book), which counts a skipped symbol as ok.
"""

from __future__ import annotations

from trader.engine.report import TickReport

TICK_OUTCOMES = ("ok", "degraded", "failed", "missed")
EXCHANGE_ERROR_KINDS = (
    "rate_limited", "ddos_protection", "timeout", "unavailable", "network", "bad_response",
    "operation_failed", "authentication", "exchange_error",
)  # fmt: skip
GPU_MEMORY_KINDS = ("allocated", "reserved", "peak_allocated")
COMMANDS = ("pause", "resume", "flatten", "reload", "invalid")
COMMAND_RESULTS = (
    "accepted", "bad_signature", "replayed", "stale", "malformed", "unknown_command",
    "rate_limited", "failed", "error",
)  # fmt: skip
TASKS = ("quotes", "reconcile", "equity", "heartbeat")  # the periodic jobs between ticks
RISK_LIMITS = ("max_drawdown", "daily_loss")
DEVICE_KEYS = ("device", "precision", "reason", "fallback", "name", "capability", "torch",
               "cuda", "bf16")  # fmt: skip
# Durations, from 100 us (the baseline forecaster, most stages of a tick) to minutes (a large
# model on a CPU).
SECONDS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
LATENESS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0)


def tick_outcome(report: TickReport) -> str:
    """failed: a stage failed; degraded: a symbol skipped the tick; ok: neither."""
    if report.failed_stages:
        return "failed"
    return "degraded" if report.skipped else "ok"
