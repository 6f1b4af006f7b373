"""The dashboard's row on the daemon's process, from prometheus_client's process collector
(Linux): memory that grows over the weeks a daemon runs, CPU, and file descriptors (sockets,
the ledger) against the limit.

Left off, on purpose: process_virtual_memory_bytes (CUDA and torch map large address ranges
they never touch: resident memory is what is used), process_start_time_seconds (a restart
shows as Daemon DOWN and counters' resets), python_info (the Python version is in the Build
table) and the `*_created` series beside every counter and histogram (when each series began:
Prometheus sees resets without them). tests/deploy_queries.py's LEFT_OFF keeps that list, and
a test checks every other exported metric is on the dashboard or in the rules.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.models import dashboard as dm
from panel_kit import on_right_axis, query, sel, timeseries


def process_panels() -> list[Builder[dm.Panel] | db.Row]:
    return [
        db.Row("Process"),
        timeseries(
            "Memory and CPU",
            "Resident memory of the daemon (left axis; a steady climb over days is a leak) and "
            "the CPU cores it uses, averaged over 5 minutes (right axis).",
            query(f"max({sel('process_resident_memory_bytes')})", "resident memory"),
            query(f"sum(rate({sel('process_cpu_seconds_total')}[5m]))", "CPU cores"),
        )
        .unit("bytes")
        .min(0)
        .override_by_query("B", on_right_axis("short")),
        timeseries(
            "Open file descriptors",
            "Files and sockets the daemon holds open, and the limit it may not pass.",
            query(f"max({sel('process_open_fds')})", "open"),
            query(f"max({sel('process_max_fds')})", "limit"),
        ).min(0),
    ]
