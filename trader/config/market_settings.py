"""The settings of the exchange and the market traded on it: symbols, bars, calendars, quotes,
and the market a replay simulates."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AwareDatetime, Field, SecretStr, field_validator, model_validator

from trader.config.alpaca_settings import AlpacaSettings
from trader.config.section import PositiveSeconds, Section
from trader.domain import Timeframe, check_symbol

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class VenueClockSettings(Section):
    speed: float = Field(
        1.0,
        gt=0,
        description="the venue's time runs this many times as fast as the wall clock: a "
        "sandbox's accelerated replay (trader sandbox --venue alpaca prints all three "
        "settings); anything but 1 needs exchange.api_base_url on loopback",
    )
    wall_origin: AwareDatetime | None = Field(
        None,
        description="the wall-clock instant the accelerated time runs from (until then it "
        "stands at origin)",
    )
    origin: AwareDatetime | None = Field(
        None, description="the venue's time at wall_origin (default: wall_origin itself)"
    )

    @property
    def scaled(self) -> bool:
        return self.speed != 1 or self.origin is not None

    def start(self) -> tuple[float, datetime, datetime | None] | None:
        """(speed, wall origin, origin) of an accelerated clock; None: the wall clock."""
        if not self.scaled or self.wall_origin is None:
            return None
        return self.speed, self.wall_origin, self.origin

    @model_validator(mode="after")
    def _origin_needs_its_wall_instant(self) -> VenueClockSettings:
        if self.scaled and self.wall_origin is None:
            raise ValueError("an accelerated or shifted clock needs wall_origin")
        return self


class ExchangeSettings(Section):
    venue: Literal["ccxt", "alpaca"] = Field(
        "ccxt",
        description="how the daemon reaches its exchange: ccxt (exchange.id), or Alpaca "
        "through its own SDK (US stocks and crypto; exchange.alpaca)",
    )
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
    resting_both_sides: Literal["auto", "allowed", "forbidden"] = Field(
        "auto",
        description="may one symbol rest a buy and a sell order at once: auto (forbidden on "
        "Alpaca, whose wash-trade check refuses an order opposite a resting one; allowed on "
        "ccxt venues); forbidden makes maxdiff rest one side at a time, so a backtest run "
        "with it trades as on Alpaca",
    )
    alpaca: AlpacaSettings = AlpacaSettings()
    clock: VenueClockSettings = VenueClockSettings()

    @property
    def rests_both_sides(self) -> bool:
        """Whether the venue lets one symbol rest both a buy and a sell."""
        if self.resting_both_sides == "auto":
            return self.venue != "alpaca"
        return self.resting_both_sides == "allowed"

    @property
    def name(self) -> str:
        """The venue's name in locks, logs and file paths: the ccxt id, or "alpaca"."""
        return "alpaca" if self.venue == "alpaca" else self.id

    @model_validator(mode="after")
    def _accelerated_only_on_loopback(self) -> ExchangeSettings:
        # Another clock than the wall's makes sense only against the local emulator that
        # keeps the same one: at a real exchange it would trade on times that are not now.
        host = urlsplit(self.api_base_url).hostname if self.api_base_url else None
        if self.clock.scaled and host not in LOOPBACK:
            raise ValueError(
                "exchange.clock: an accelerated or shifted clock is only for a local emulator "
                "(exchange.api_base_url on 127.0.0.1, localhost or ::1, as trader sandbox "
                "prints it)"
            )
        return self


class MarketSettings(Section):
    kind: Literal["spot", "perp"] = Field(
        "spot",
        description="what is traded: spot, or perp (a linear perpetual future: `trader "
        "download` fetches its funding rates and mark-price candles with the bars, and a "
        "backtest pays funding at each recorded funding time)",
    )
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
