"""The parts of the daemon around the engine: when ticks fall and the loop that runs them,
the wall-clock jobs, inference off the event loop, the event loop's lag, systemd's notify
protocol, operator commands and settings reloads. `trader.service` puts them together."""
