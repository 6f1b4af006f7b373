"""`trader doctor`: the device checks the daemon makes at start-up, as a readable report with a
verdict and an exit code, and an evidence folder to attach to a bug report.

`trader.doctor.command.run_doctor` runs it; `trader.cli.doctor` (no torch) adds the verb."""
