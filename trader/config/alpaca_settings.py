"""The settings of Alpaca as a venue (`exchange.venue = "alpaca"`): which of its environments,
its keys for each, the market data feed, and extended hours.

Alpaca gives a paper account and a live one separate keys; both may be set at once (the seed
system's `ALP_KEY_ID` / `ALP_SECRET_KEY` and `ALP_KEY_ID_PROD` / `ALP_SECRET_KEY_PROD`), and
`paper` (the seed's `PAPER`) picks which environment, and so which keys, the daemon uses. Live
money still needs `broker.mode = "live"` and `broker.live_confirmation = true`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from trader.config.section import Section


class AlpacaSettings(Section):
    paper: bool = Field(
        True,
        description="trade on Alpaca's paper environment (paper keys); false: the live one, "
        "with real money (live keys, and broker.mode = live with broker.live_confirmation)",
    )
    key_id: SecretStr | None = Field(None, description="paper account's API key id (ALP_KEY_ID)")
    secret_key: SecretStr | None = Field(
        None, description="paper account's secret key (ALP_SECRET_KEY)"
    )
    live_key_id: SecretStr | None = Field(
        None, description="live account's API key id (ALP_KEY_ID_PROD)"
    )
    live_secret_key: SecretStr | None = Field(
        None, description="live account's secret key (ALP_SECRET_KEY_PROD)"
    )
    feed: Literal["iex", "sip"] = Field(
        "iex",
        description="stock market data: iex (free, one exchange) or sip (all US exchanges, "
        "needs a data subscription)",
    )
    crypto_fee_tier: int = Field(
        1,
        ge=1,
        le=8,
        description="the account's crypto fee tier by 30-day volume (1: under $100k, 15 bps "
        "maker / 25 bps taker); a crypto fill's fee is estimated by it until Alpaca posts the "
        "fee at the end of the day",
    )
    extended_hours: list[str] = Field(
        [],
        description="stocks that may trade in the pre- and after-market (limit orders only, "
        "day orders); any other stock gets no order while its market is closed",
    )

    trade_stream: bool = Field(
        True,
        description="hear fills and order changes at once on Alpaca's trade-updates stream; "
        "polling each tick stays, and carries on alone while the stream is down",
    )

    def credentials(self) -> tuple[SecretStr | None, SecretStr | None]:
        """The key id and secret of the environment `paper` picks."""
        if self.paper:
            return self.key_id, self.secret_key
        return self.live_key_id, self.live_secret_key

    def key_names(self) -> tuple[str, str]:
        """The settings that hold them, for messages."""
        if self.paper:
            return "exchange.alpaca.key_id", "exchange.alpaca.secret_key"
        return "exchange.alpaca.live_key_id", "exchange.alpaca.live_secret_key"
