"""What trader relies on in alpaca-py, which offers no public way to set a request timeout or
to turn its retries off (trader/market/alpaca/feed.py says why): the installed release is
the pinned one, its clients still keep their HTTP session in `_session` and their retries in
`_retry`, and none has gained a public setting for them (if one has, this fails: use it, and
drop the private attributes). Read against alpaca-py 0.44's alpaca/common/rest.py and
alpaca/trading/client.py."""

from __future__ import annotations

import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path

import requests
from alpaca.common.rest import RESTClient
from alpaca.data.historical import CryptoHistoricalDataClient, StockHistoricalDataClient
from alpaca.trading.client import TradingClient
from pydantic import SecretStr

from trader.clock import WallClock
from trader.config.alpaca_settings import AlpacaSettings
from trader.config.market_settings import ExchangeSettings
from trader.market.alpaca.feed import alpaca_exchange

PYPROJECT = Path(__file__).parents[3] / "pyproject.toml"
PUBLIC_WAYS = {"session", "timeout", "http_session", "adapter", "retry"}


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def test_the_installed_alpaca_py_is_the_pinned_release():
    dependencies = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    [pin] = [d for d in dependencies if d.startswith("alpaca-py")]
    bounds = dict(b.partition("=")[::2] if ">=" in b else ("<", b[1:]) for b in
                  pin.removeprefix("alpaca-py").split(","))  # fmt: skip
    assert set(bounds) == {">", "<"}, f"alpaca-py must be pinned to one release line: {pin}"
    installed = _release(version("alpaca-py"))
    assert _release(bounds[">"]) <= installed < _release(bounds["<"])


def test_no_client_has_gained_a_public_timeout_session_or_retry_setting():
    for client in (TradingClient, StockHistoricalDataClient, CryptoHistoricalDataClient):
        params = set(inspect.signature(client.__init__).parameters)
        found = {p for p in params if any(way in p for way in PUBLIC_WAYS)}
        assert not found, f"{client.__name__} now takes {found}: use it instead of _take_over"
    rest = set(inspect.signature(RESTClient.__init__).parameters)
    assert not {p for p in rest if "session" in p or "timeout" in p}


def test_the_clients_keep_our_session_with_its_timeout_and_no_retries():
    keys = AlpacaSettings(key_id=SecretStr("k"), secret_key=SecretStr("s"))
    settings = ExchangeSettings(venue="alpaca", timeout_s=7.5, alpaca=keys)
    exchange = alpaca_exchange(settings, WallClock())
    clients = (exchange._trading, exchange._stocks, exchange._crypto)
    for client in clients:
        assert isinstance(client._session, requests.Session)
        assert client._session.timeout_s == 7.5  # type: ignore[attr-defined]
        assert client._retry == 0
    assert exchange.credential_settings == ("exchange.alpaca.key_id", "exchange.alpaca.secret_key")
