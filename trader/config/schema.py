"""The daemon's settings, one model per concern (the sections live in their own modules).
Every field says what it is for: the descriptions become `config/default.toml`
(`trader config template`)."""

from __future__ import annotations

import re
from decimal import Decimal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from trader.config.backtest_settings import BacktestSettings
from trader.config.daemon_settings import (
    LedgerSettings,
    LogSettings,
    MetricsSettings,
    MqttSettings,
    ScheduleSettings,
)
from trader.config.finetune_settings import FinetuneSettings
from trader.config.forecast_settings import ForecastSettings
from trader.config.market_settings import ExchangeSettings, MarketSettings
from trader.config.promote_settings import PromoteSettings, PromotionSettings
from trader.config.trading_settings import BrokerSettings, RiskSettings, StrategySettings
from trader.domain import quote_currency
from trader.domain.capital_ramp import parse_ramp

_INSTANCE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


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
    finetune: FinetuneSettings = FinetuneSettings()
    promote: PromoteSettings = PromoteSettings()
    promotion: PromotionSettings = PromotionSettings()

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

    @model_validator(mode="after")
    def _ramp_anchored(self) -> Settings:
        ramp = parse_ramp(self.broker.live_ramp)
        if not ramp:
            return self
        if self.promotion.at is None:
            raise ValueError(
                "broker.live_ramp counts its days from promotion.at, which is not set: "
                "`trader promote` writes both"
            )
        first = ramp[0].fraction
        if first != Decimal(repr(self.broker.live_capital_fraction)):
            raise ValueError(
                f"broker.live_ramp starts at {first}, not at broker.live_capital_fraction "
                f"{self.broker.live_capital_fraction}: the ramp's first step is the fraction"
            )
        return self
