"""The daemon's settings, one model per concern. Every field says what it is for: the
descriptions become `config/default.toml` (`trader config template`)."""

from __future__ import annotations

import re
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from trader.domain import Timeframe, check_symbol, quote_currency

StrategyName = Literal["simple", "ci_guard", "maxdiff"]
Runtime = Literal["eager", "compile"]
PositiveSeconds = Annotated[float, Field(gt=0)]
Money = Annotated[Decimal, Field(gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Port = Annotated[int, Field(ge=1, le=65535)]

_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:[0-9]+)$")
_INSTANCE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class ExchangeSettings(Section):
    id: str = Field("binance", description="ccxt exchange id for market data and live orders")
    api_key: SecretStr | None = Field(None, description="API key (live trading only)")
    api_secret: SecretStr | None = Field(None, description="API secret (live trading only)")
    api_password: SecretStr | None = Field(
        None, description="API passphrase, for exchanges that need one"
    )
    testnet: bool = Field(False, description="use the exchange's testnet, where ccxt has one")
    timeout_s: PositiveSeconds = Field(10.0, description="timeout of one exchange request")
    retry_attempts: int = Field(4, ge=1, le=20, description="tries per exchange call")
    retry_max_delay_s: PositiveSeconds = Field(
        20.0, description="longest wait between tries; an exchange asking for more skips the tick"
    )
    api_base_url: str | None = Field(
        None, description="send REST calls here instead (the local exchange emulator)"
    )


class MarketSettings(Section):
    symbols: list[str] = Field(
        ["BTC/USDT", "SOL/USDT"],
        min_length=1,
        description="unified ccxt symbols to trade (env: comma-separated or a JSON list)",
    )
    timeframe: str = Field("1h", description="bar length: 1m, 5m, 15m, 1h, 4h, 1d, ...")
    context_bars: int = Field(512, ge=16, le=8192, description="closed bars the model sees")
    add_latest: bool = Field(
        True,
        description="attach the latest real bid/ask to each tick (ADD_LATEST); false uses a "
        "synthetic quote (bid and ask both the last close) that never passes a spread gate",
    )
    max_quote_age_s: PositiveSeconds = Field(
        30.0, description="a quote older than this is stale: the symbol skips the tick"
    )
    calendar: str = Field(
        "auto",
        description="trading calendar of every symbol: continuous (24/7, crypto), fx (Sunday "
        "to Friday 17:00 New York), or an exchange's code from exchange_calendars (XNYS, XSHG "
        "with its lunch break, ...); auto: continuous on a crypto exchange, inferred from the "
        "data in replays and backtests (the log and the report say which)",
    )
    calendars: dict[str, str] = Field(
        {}, description='calendar of particular symbols, e.g. {"GOOG/USD" = "XNYS"}'
    )
    gap_policy: Literal["skip", "bridge"] = Field(
        "skip",
        description="a bar missing in a session (the venue did not have it even when asked "
        "again) is counted, then: skip trades the symbol again once min_contiguous_bars "
        "bars have closed in a row; bridge trades at once, the model seeing the bars on "
        "either side of the hole as neighbours",
    )
    min_contiguous_bars: int = Field(
        16, ge=1, le=8192, description="skip: bars in a row needed after a missing bar"
    )
    markets_refresh_s: PositiveSeconds = Field(
        3600.0, description="how often the exchange's market list is reloaded"
    )
    replay_spread: Literal["fixed", "high_low"] = Field(
        "fixed",
        description="replay quotes: a fixed spread, or one estimated from bar high/low "
        "(Corwin-Schultz) with replay_spread_bps as its floor; labelled modelled, never real",
    )
    replay_spread_bps: float = Field(5.0, ge=0, description="replay spread (or its floor), bps")
    replay_price_step: Decimal = Field(
        Decimal("0.00000001"), gt=0, description="replay: the market's price grid"
    )
    replay_amount_step: Decimal = Field(
        Decimal("0.00000001"), gt=0, description="replay: the market's amount step"
    )
    replay_min_notional: Decimal = Field(
        Decimal(0), ge=0, description="replay: the market's minimum order value"
    )

    @field_validator("symbols")
    @classmethod
    def _symbols(cls, symbols: list[str]) -> list[str]:
        for symbol in symbols:
            check_symbol(symbol)
        duplicates = sorted({s for s in symbols if symbols.count(s) > 1})
        if duplicates:
            raise ValueError(f"listed more than once: {', '.join(duplicates)}")
        return symbols

    @field_validator("timeframe")
    @classmethod
    def _timeframe(cls, text: str) -> str:
        Timeframe(text)
        return text

    @model_validator(mode="after")
    def _contiguous_within_context(self) -> MarketSettings:
        if self.min_contiguous_bars > self.context_bars:
            raise ValueError(
                f"min_contiguous_bars ({self.min_contiguous_bars}) is more than context_bars "
                f"({self.context_bars}): the window could never hold them"
            )
        return self


class TotoSettings(Section):
    repo: str = Field("Datadog/Toto-Open-Base-1.0", description="Hugging Face repository")
    runtime: Runtime = Field(
        "eager", description="eager, or compile (opt-in; TOTO_DISABLE_COMPILE=0 also selects it)"
    )
    compile_mode: str | None = Field(None, description="torch.compile mode, e.g. reduce-overhead")
    max_recompiles: int = Field(
        2,
        ge=0,
        description="compile: recompiles after warm-up that switch the model to eager for good "
        "(logged, in the metrics); torch itself gives up at its recompile_limit (8)",
    )
    num_samples: int = Field(256, ge=1, le=8192, description="sample paths per forecast")
    variates: list[Literal["close", "high", "low", "open", "volume"]] = Field(
        ["close", "high", "low"], min_length=1, description="bar fields forecast together"
    )


class KronosSettings(Section):
    repo: str = Field("NeoQuasar/Kronos-small", description="Hugging Face repository")
    tokenizer_repo: str = Field(
        "NeoQuasar/Kronos-Tokenizer-base", description="Hugging Face repository of the tokenizer"
    )
    runtime: Runtime = Field(
        "eager",
        description="eager; compile is refused (its KV-cached generation recompiles as the "
        "cache grows: `trader bench compile --model kronos` measures it)",
    )
    compile_mode: str | None = Field(
        None, description="torch.compile mode for `trader bench compile --model kronos`"
    )
    max_context: int = Field(512, ge=16, le=4096, description="bars the model sees at most")
    sample_count: int = Field(16, ge=1, le=1024, description="sample paths per forecast")
    temperature: float = Field(1.0, gt=0, description="sampling temperature")
    top_k: int = Field(0, ge=0, description="keep the k likeliest tokens (0: off; overrides top_p)")
    top_p: float = Field(0.9, gt=0, le=1, description="nucleus sampling mass")


class ForecastSettings(Section):
    model: Literal["toto", "kronos", "baseline"] = Field("toto", description="forecaster")
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N (cuda never falls back)")
    precision: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Toto's autocast: auto is float32 on CPU, bfloat16 on GPUs with native "
        "bfloat16, else float16 (Kronos runs float32)",
    )
    horizon: int = Field(1, ge=1, le=1024, description="bars ahead to forecast")
    seed: int = Field(0, ge=0, description="random seed of the sampler")
    quantiles: list[float] = Field(
        [0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9], min_length=1, description="quantile levels reported"
    )
    baseline_lookback: int = Field(
        256, ge=8, description="bars of history behind the baseline's quantiles"
    )
    weights_dir: Path | None = Field(
        None, description="local directory of weights; default: the Hugging Face cache"
    )
    hf_token: SecretStr | None = Field(None, description="Hugging Face token, if a repo needs it")
    download: bool = Field(
        True, description="fetch missing weights from the Hugging Face hub (false: cache only)"
    )
    toto: TotoSettings = TotoSettings()
    kronos: KronosSettings = KronosSettings()

    @field_validator("device")
    @classmethod
    def _device(cls, device: str) -> str:
        if not _DEVICE.match(device):
            raise ValueError(f"{device!r} is not auto, cpu, cuda or cuda:N")
        return device

    @field_validator("quantiles")
    @classmethod
    def _quantiles(cls, levels: list[float]) -> list[float]:
        if any(not 0 < q < 1 for q in levels):
            raise ValueError("quantile levels lie strictly between 0 and 1")
        return sorted(set(levels))


class StrategySettings(Section):
    name: StrategyName = Field("ci_guard", description="simple, ci_guard or maxdiff")
    per_symbol: dict[str, StrategyName] = Field(
        {}, description='strategy for particular symbols, e.g. {"SOL/USDT" = "maxdiff"}'
    )
    allow_short: bool = Field(False, description="short where the venue allows it")
    consensus: bool = Field(
        False, description="trade only when the primary and the consensus model agree"
    )
    consensus_model: Literal["toto", "kronos", "baseline"] = Field(
        "kronos", description="the second model the consensus gate asks"
    )
    position_fraction: Fraction = Field(
        0.2, description="a position's size as a share of equity (then capped by risk)"
    )
    ci_lower_quantile: float = Field(0.4, gt=0, lt=0.5, description="ci_guard band: lower level")
    ci_upper_quantile: float = Field(0.6, gt=0.5, lt=1, description="ci_guard band: upper level")
    ci_multiplier: float = Field(1.0, gt=0, description="ci_guard band width multiplier")
    maxdiff_entry_quantile: float = Field(
        0.2, gt=0, lt=0.5, description="maxdiff buys at this quantile of the forecast low"
    )
    maxdiff_exit_quantile: float = Field(
        0.8, gt=0.5, lt=1, description="maxdiff sells at this quantile of the forecast high"
    )


class RiskSettings(Section):
    max_order_notional: Money = Field(Decimal(1000), description="largest single order, in cash")
    max_position_notional: Money = Field(Decimal(2500), description="largest position per symbol")
    max_total_exposure: Money = Field(Decimal(5000), description="largest sum of |positions|")
    max_orders_per_minute: int = Field(10, ge=1, description="order rate limit")
    max_daily_loss: Fraction = Field(0.05, description="halt after losing this share of equity")
    max_drawdown: Fraction = Field(0.10, description="halt after this drawdown from today's peak")
    min_edge_bps: float = Field(5.0, ge=0, description="expected edge required after fees+spread")


class BrokerSettings(Section):
    mode: Literal["paper", "live"] = Field("paper", description="paper or live")
    live_confirmation: bool = Field(
        False, description="must be true, with mode = live and API keys, to trade real money"
    )
    currency: str = Field("USDT", description="cash currency; every symbol is quoted in it")
    starting_cash: Money = Field(Decimal(10000), description="paper account's starting cash")
    maker_fee_bps: Decimal = Field(Decimal(10), ge=0, description="paper maker fee")
    taker_fee_bps: Decimal = Field(Decimal(10), ge=0, description="paper taker fee")
    slippage_bps: Decimal = Field(Decimal(2), ge=0, description="paper market-order slippage")
    max_volume_share: Fraction = Field(
        0.1, description="paper: a fill takes at most this share of a bar's volume (or quote size)"
    )
    on_shutdown: Literal["keep", "cancel"] = Field(
        "keep", description="what to do with open orders on a clean stop"
    )
    capital_share: Fraction = Field(
        1.0,
        description="live: trade with at most this share of the account's cash balance when "
        "the ledger's account is opened (0.1: start live with 10% of capital)",
    )
    capital_limit: Money | None = Field(
        None, description="live: and with at most this much cash, whatever the balance"
    )
    unknown_orders: Literal["leave", "cancel"] = Field(
        "leave",
        description="live: orders on the venue the ledger does not know, found when "
        "reconciling: reported and left alone, or reported and cancelled",
    )
    recv_window_ms: int = Field(
        5000,
        ge=100,
        le=60000,
        description="live: how long a signed request stays valid at the venue; an order whose "
        "answer was lost and that cannot be found after this long never arrived",
    )
    lock_dir: Path = Field(
        Path(tempfile.gettempdir()) / "trader-locks",
        description="live: host-wide folder of symbol locks, so two daemons on one host never "
        "trade the same symbol of the same account",
    )


class LedgerSettings(Section):
    path: Path = Field(Path("var/trader.sqlite3"), description="SQLite ledger file")


class MetricsSettings(Section):
    enabled: bool = Field(True, description="serve /metrics, /healthz and /readyz")
    host: str = Field("127.0.0.1", description="listen address (loopback by default)")
    port: int = Field(
        9108, ge=0, le=65535, description="listen port (0: any free port, stated in the log)"
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


class BacktestSettings(Section):
    strategies: list[StrategyName] = Field(
        ["simple", "ci_guard", "maxdiff"],
        min_length=1,
        description="strategies `trader backtest` compares (--strategy overrides)",
    )
    cache_dir: Path = Field(
        Path("var/forecast-cache"),
        description="forecasts computed for backtests, keyed by model, weights, parameters and "
        "data: re-running strategies over the same forecasts costs only the simulation",
    )
    batch_windows: int = Field(
        32,
        ge=1,
        le=4096,
        description="windows per model call when forecasting history; part of the cache key "
        "(batches are fixed by the clock, so the sampler's seeds depend on it)",
    )
    max_skipped_share: float = Field(
        0.05,
        ge=0,
        le=1,
        description="a run whose symbols skipped more than this share of their ticks (or "
        "any tick failed) exits 1, listing why, unless --allow-skips",
    )
    on_halt: Literal["stop", "resume_next_day", "reduce_only"] = Field(
        "reduce_only",
        description="what a halt (the daily loss limit) does in a backtest: stop (no order "
        "for the rest of the run), resume_next_day (halted until the next day), reduce_only "
        "(only orders that shrink a position until the next day); the daemon's halt always "
        "waits for a person",
    )
    risk_free_rate: float = Field(
        0.0, ge=0, lt=1, description="annual risk-free rate taken off returns in Sharpe/Sortino"
    )


class Settings(BaseSettings):
    """All settings. Build them with `trader.config.load_settings`, which layers the sources
    (defaults < TOML < secrets dir < .env < environment) and records where each value came from;
    the class itself validates whatever values it is given and reads nothing by itself."""

    model_config = SettingsConfigDict(
        extra="forbid", frozen=True, validate_default=True, env_prefix="TRADER_"
    )

    instance: str = Field("default", description="name of this daemon in topics and locks")
    exchange: ExchangeSettings = ExchangeSettings()
    market: MarketSettings = MarketSettings()
    forecast: ForecastSettings = ForecastSettings()
    strategy: StrategySettings = StrategySettings()
    risk: RiskSettings = RiskSettings()
    broker: BrokerSettings = BrokerSettings()
    ledger: LedgerSettings = LedgerSettings()
    metrics: MetricsSettings = MetricsSettings()
    mqtt: MqttSettings = MqttSettings()
    schedule: ScheduleSettings = ScheduleSettings()
    log: LogSettings = LogSettings()
    backtest: BacktestSettings = BacktestSettings()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # One place reads the outside world: trader.config.loader, which also keeps provenance.
        return (init_settings,)

    @field_validator("instance")
    @classmethod
    def _instance(cls, name: str) -> str:
        if not _INSTANCE.match(name):
            raise ValueError("use 1-63 of a-z, 0-9, '_' and '-', starting with a letter or digit")
        return name

    @model_validator(mode="after")
    def _symbols_in_cash_currency(self) -> Settings:
        for symbol in self.market.symbols:
            quote = quote_currency(symbol)
            if quote != self.broker.currency:
                raise ValueError(
                    f"market.symbols: {symbol} is quoted in {quote}, not in broker.currency "
                    f"{self.broker.currency}: one account holds one currency, so set "
                    f'broker.currency = "{quote}" or trade symbols quoted in '
                    f"{self.broker.currency}"
                )
        needed = {
            0.5,
            self.strategy.ci_lower_quantile,
            self.strategy.ci_upper_quantile,
            self.strategy.maxdiff_entry_quantile,
            self.strategy.maxdiff_exit_quantile,
        }
        missing = sorted(needed - set(self.forecast.quantiles))
        if missing:
            raise ValueError(f"forecast.quantiles lacks {missing}, which the strategy settings use")
        unknown = sorted(set(self.strategy.per_symbol) - set(self.market.symbols))
        if unknown:
            raise ValueError(
                f"strategy.per_symbol names symbols not in market.symbols: {', '.join(unknown)}"
            )
        return self
