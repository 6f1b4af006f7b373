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
EVENT_QUEUES = ("trading", "other")  # the MQTT link's outgoing queues (telemetry/event_queues.py)
TASKS = ("quotes", "reconcile", "equity", "heartbeat")  # the periodic jobs between ticks
RISK_LIMITS = ("max_drawdown", "daily_loss")
DEVICE_KEYS = ("device", "precision", "reason", "fallback", "name", "capability", "torch",
               "cuda", "bf16")  # fmt: skip
# trader_model_info: each model's weights and where they came from (forecast.provenance).
MODEL_INFO_KEYS = ("model", "origin", "base", "revision", "verdict", "data", "steps")
# Durations of one model call: dense (the E6 series, each bucket about 1.5x the last) from
# 1 ms (the baseline) through 10-500 ms (a model on a GPU) to 10 s, so a p50 or p99 read from
# them moves with a 2x slowdown; then coarse up to minutes (a large model on a CPU).
INFERENCE_SECONDS = (
    0.001, 0.0015, 0.0022, 0.0033, 0.0047, 0.0068, 0.01, 0.015, 0.022, 0.033, 0.047, 0.068,
    0.1, 0.15, 0.22, 0.33, 0.47, 0.68, 1.0, 1.5, 2.2, 3.3, 4.7, 6.8, 10.0, 20.0, 30.0, 60.0,
    120.0,
)  # fmt: skip
# Durations of a tick's stages: from 10 us (the strategy, the risk checks of a few symbols
# take tens of microseconds) to minutes (a forecast stage on a CPU).
STAGE_SECONDS = (
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
LATENESS = (0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0)


def tick_outcome(report: TickReport) -> str:
    """failed: a stage failed; degraded: a symbol skipped the tick, or a perpetual was valued
    on a mark not read at it; ok: neither."""
    if report.failed_stages:
        return "failed"
    return "degraded" if report.skipped or report.stale_marks else "ok"
