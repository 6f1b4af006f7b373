"""The daemon: one service for live paper/live trading and for replays of recorded bars.

`trader.service.service.Service` puts the parts below together; reading it tells the daemon's
life in one screen. Start-up, in the order that shows an operator the most useful failure first
(`startup`):

    settings -> logging (the CLI) -> telemetry up (`telemetry`: /healthz answers from here on,
    /readyz says which step is under way) -> device check -> ledger recovery -> broker
    reconciliation -> market data (`exchange`) -> model load and warm-up -> scheduler
    (`ticking`, `jobs`) -> ready

A device, ledger, settings or model problem stops start-up with the reason and the fix (exit
69, 65 or 78). An unreachable exchange does not: the daemon says so plainly (log, /readyz
(`health`), metrics), keeps trying, and trades once it is back. Then READY=1 goes to systemd,
the retained MQTT status (`status`) says "ready", and ticks run at each bar close plus the
settle delay (or at each recorded bar close, on the replay's simulated clock).

SIGTERM/SIGINT (`control_surface`): no new tick or job; the running tick finishes (within
`schedule.shutdown_deadline_s`); open orders are kept or cancelled (`broker.on_shutdown`,
`shutdown`); the ledger is checkpointed and closed; the status says "offline"; exit 0. SIGHUP
and the MQTT `reload` command reload the strategy and risk settings.
"""
