"""The settings of the daemon's surroundings: its ledger, metrics, MQTT, schedule and logs."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from trader.config.section import Port, PositiveSeconds, Section


class LedgerSettings(Section):
    path: Path = Field(Path("var/trader.sqlite3"), description="SQLite ledger file")
    bar_retention_days: int = Field(
        35,
        ge=0,
        le=3660,
        description="bars kept this many days back from the newest (beyond the windows' own), "
        "so `trader shortfall` can replay a paper month; 0: the windows' bars only",
    )


class MetricsSettings(Section):
    enabled: bool = Field(True, description="serve /metrics, /healthz and /readyz")
    host: str = Field("127.0.0.1", description="listen address (loopback by default)")
    port: int = Field(
        9108, ge=0, le=65535, description="listen port (0: any free port, stated in the log)"
    )
    idle_timeout_s: PositiveSeconds = Field(
        30.0,
        description="a connection that has not sent a whole request within this long (a new "
        "one, or one kept alive after an answer) is closed",
    )


class MqttSettings(Section):
    enabled: bool = Field(False, description="publish events to an MQTT broker")
    host: str = Field("127.0.0.1", description="broker host")
    port: Port = Field(1883, description="broker port")
    username: str | None = Field(None, description="broker user name")
    password: SecretStr | None = Field(None, description="broker password")
    tls: bool = Field(False, description="connect with TLS")
    ca_file: Path | None = Field(None, description="CA bundle for TLS (default: the system's)")
    cert_file: Path | None = Field(None, description="client certificate for TLS, if required")
    key_file: Path | None = Field(None, description="client key for TLS, if required")
    topic_prefix: str = Field("trader", description="topics are <prefix>/<instance>/...")
    queue_size: int = Field(1000, ge=1, description="events buffered before dropping")
    heartbeat_interval_s: PositiveSeconds = Field(30.0, description="heartbeat event period")
    reconnect_max_delay_s: PositiveSeconds = Field(
        30.0, description="longest wait between reconnection attempts (exponential backoff)"
    )
    commands_enabled: bool = Field(False, description="accept signed commands on .../cmd")
    command_secret: SecretStr | None = Field(None, description="HMAC key for signed commands")
    command_window_s: PositiveSeconds = Field(
        30.0, description="a command's timestamp must be this close to now (replay protection)"
    )
    command_rate_per_s: float = Field(
        1.0,
        gt=0,
        description="payloads a second read on the cmd topic, on average; beyond it (and the "
        "burst) they are refused unread and counted as rate_limited (one bucket per daemon: "
        "MQTT does not say who published)",
    )
    command_burst: int = Field(
        10, ge=1, description="payloads read at once before the rate applies"
    )
    command_refusal_interval_s: float = Field(
        10.0,
        ge=0,
        description="refused payloads are answered on cmd/result and logged at most once per "
        "kind of refusal and interval (the others counted; 0: every one)",
    )

    @field_validator("topic_prefix")
    @classmethod
    def _topic_prefix(cls, prefix: str) -> str:
        # A wildcard would subscribe the daemon to other daemons' command topics; an empty
        # level makes topics that an ACL written for `<prefix>/+/cmd` does not match.
        problems = [
            what
            for what, found in (
                ("'+'", "+" in prefix),
                ("'#'", "#" in prefix),
                ("NUL", "\x00" in prefix),
                ("an empty level (a leading, trailing or double '/')", "" in prefix.split("/")),
            )
            if found
        ]
        if problems:
            raise ValueError(f"a topic prefix cannot hold {', '.join(problems)}")
        return prefix

    @model_validator(mode="after")
    def _commands_need_a_secret(self) -> MqttSettings:
        if self.commands_enabled and not (
            self.command_secret and len(self.command_secret.get_secret_value()) >= 16
        ):
            raise ValueError("commands_enabled needs a command_secret of at least 16 characters")
        return self


class ScheduleSettings(Section):
    settle_delay_s: float = Field(5.0, ge=0, description="wait after bar close before a tick")
    quote_poll_interval_s: PositiveSeconds = Field(10.0, description="quote/order polling period")
    reconcile_interval_s: PositiveSeconds = Field(300.0, description="broker reconciliation period")
    equity_snapshot_interval_s: PositiveSeconds = Field(60.0, description="equity snapshot period")
    shutdown_deadline_s: PositiveSeconds = Field(
        30.0, description="how long a stop waits for a running tick"
    )
    misfire_grace_s: PositiveSeconds = Field(
        600.0,
        description="a tick that cannot start within this long after its time is missed "
        "(counted, not run); later ones that fall due meanwhile are coalesced into one",
    )


class LogSettings(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="log level")
    format: Literal["auto", "json", "console"] = Field(
        "auto", description="auto: JSON lines off a TTY (journald, docker), colour on a TTY"
    )
