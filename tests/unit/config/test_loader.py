from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trader.config import ConfigError, Settings, load_settings
from trader.config.loader import data_layer, resolve_config_file, resolve_secrets_dir
from trader.config.render import show_json, show_text

LAYERS = ("file", "secrets", "dotenv", "env")  # lowest to highest priority


def load(
    tmp: Path,
    *,
    toml: str | None = None,
    secrets: dict[str, str] | None = None,
    dotenv: str | None = None,
    env: dict[str, str] | None = None,
):
    config = None
    if toml is not None:
        config = tmp / "config.toml"
        config.write_text(toml)
    secrets_dir = None
    if secrets is not None:
        secrets_dir = tmp / "secrets"
        secrets_dir.mkdir(exist_ok=True)
        for name, value in secrets.items():
            (secrets_dir / name).write_text(value)
    dotenv_file = tmp / ".env"
    dotenv_file.write_text(dotenv or "")
    return load_settings(
        config, environ=env or {}, dotenv_file=dotenv_file, secrets_dir=secrets_dir
    )


def problems(tmp: Path, **sources) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp, **sources)
    return "\n".join(caught.value.problems)


def test_nothing_set_means_the_defaults_and_says_so(tmp_path):
    loaded = load(tmp_path)
    assert loaded.settings == Settings()
    assert {str(origin) for origin in loaded.origins.values()} == {"default"}


@given(st.sets(st.sampled_from(LAYERS)))
def test_the_highest_priority_source_that_sets_a_value_wins(layers):
    value = {layer: f"user-from-{layer}" for layer in LAYERS}
    with tempfile.TemporaryDirectory() as tmp:
        loaded = load(
            Path(tmp),
            toml=f'[mqtt]\nusername = "{value["file"]}"\n' if "file" in layers else "",
            secrets={"TRADER_MQTT__USERNAME": value["secrets"] + "\n"}
            if "secrets" in layers
            else {},
            dotenv=f"TRADER_MQTT__USERNAME={value['dotenv']}\n" if "dotenv" in layers else "",
            env={"TRADER_MQTT__USERNAME": value["env"]} if "env" in layers else {},
        )
    winner = max(layers, key=LAYERS.index, default=None)
    origin = loaded.origins["mqtt.username"]
    if winner is None:
        assert loaded.settings.mqtt.username is None
        assert origin.kind == "default"
    else:
        assert loaded.settings.mqtt.username == value[winner]
        assert origin.kind == winner


def test_the_seed_system_names_work_in_the_environment_and_in_dotenv(tmp_path):
    loaded = load(tmp_path, env={"ADD_LATEST": "0", "TOTO_DISABLE_COMPILE": "0"})
    assert loaded.settings.market.add_latest is False
    assert str(loaded.origins["market.add_latest"]) == "environment (ADD_LATEST)"
    assert loaded.settings.forecast.toto.runtime == "compile"
    loaded = load(tmp_path, dotenv="ADD_LATEST=false\nTOTO_DISABLE_COMPILE=1\n")
    assert loaded.settings.market.add_latest is False
    assert loaded.origins["market.add_latest"].kind == "dotenv"
    assert loaded.settings.forecast.toto.runtime == "eager"
    # The environment outranks .env, whichever spelling each uses.
    loaded = load(tmp_path, dotenv="ADD_LATEST=0\n", env={"TRADER_MARKET__ADD_LATEST": "1"})
    assert loaded.settings.market.add_latest is True


def test_an_alias_and_its_setting_together_or_a_bad_alias_value_are_errors(tmp_path):
    both = problems(tmp_path, env={"ADD_LATEST": "1", "TRADER_MARKET__ADD_LATEST": "1"})
    assert "ADD_LATEST" in both
    assert "TRADER_MARKET__ADD_LATEST" in both
    assert "keep one" in both
    assert "expected 1 or 0" in problems(tmp_path, env={"TOTO_DISABLE_COMPILE": "maybe"})


def test_a_misspelt_toml_key_names_the_key_and_the_file(tmp_path):
    text = problems(tmp_path, toml="[market]\nadd_lates = false\n")
    assert str(tmp_path / "config.toml") in text
    assert "unknown key 'market.add_lates'" in text
    assert "did you mean market.add_latest?" in text


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[markets]\nsymbols = []\n", "unknown key 'markets'"),
        ("[forecast.tot]\nruntime = 'eager'\n", "unknown key 'forecast.tot'"),
        ("instanc = 'x'\n", "unknown key 'instanc'"),
        ("market = 5\n", "[market] is a table of settings"),
        ("[market]\nsymbols = [\n", "not valid TOML"),
    ],
)
def test_malformed_toml_files_are_refused_with_the_file_named(tmp_path, toml, expected):
    text = problems(tmp_path, toml=toml)
    assert expected in text
    assert "config.toml" in text


def test_a_toml_syntax_error_gives_the_line(tmp_path):
    assert "line 3" in problems(tmp_path, toml="[market]\ncontext_bars = 5\nadd_latest = \n")


def test_unknown_trader_variables_are_errors_and_other_variables_are_ignored(tmp_path):
    text = problems(tmp_path, env={"TRADER_MARKT__SYMBOLS": "x", "PATH": "/bin"})
    assert "unknown setting TRADER_MARKT__SYMBOLS in the environment" in text
    assert "did you mean TRADER_MARKET__SYMBOLS?" in text
    assert "unknown setting TRADER_X" in problems(tmp_path, dotenv="TRADER_X=1\n")
    loaded = load(tmp_path, env={"TRADER_CONFIG": "x.toml", "HOME": "/root", "CI": "true"})
    assert loaded.settings == Settings()


def test_lists_and_tables_come_from_comma_lists_or_json(tmp_path):
    loaded = load(
        tmp_path,
        env={
            "TRADER_MARKET__SYMBOLS": " SOL/USDT, ETH/USDT ",
            "TRADER_FORECAST__QUANTILES": "[0.9, 0.1, 0.5, 0.8, 0.2, 0.6, 0.4, 0.6]",
            "TRADER_STRATEGY__PER_SYMBOL": '{"SOL/USDT": "maxdiff"}',
        },
    )
    assert loaded.settings.market.symbols == ["SOL/USDT", "ETH/USDT"]
    assert loaded.settings.forecast.quantiles == [0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9]
    assert loaded.settings.strategy.per_symbol == {"SOL/USDT": "maxdiff"}
    assert "not valid JSON" in problems(tmp_path, env={"TRADER_MARKET__SYMBOLS": "[1,"})
    assert "JSON object" in problems(tmp_path, env={"TRADER_STRATEGY__PER_SYMBOL": "a=b"})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"TRADER_MARKET__CONTEXT_BARS": "8"}, "market.context_bars: Input should be greater"),
        ({"TRADER_MARKET__TIMEFRAME": "1M"}, "market.timeframe: timeframe '1M'"),
        ({"TRADER_MARKET__SYMBOLS": "SOLUSDT"}, "market.symbols: symbol 'SOLUSDT'"),
        ({"TRADER_MARKET__SYMBOLS": "SOL/USDT,SOL/USDT"}, "listed more than once: SOL/USDT"),
        (
            {"TRADER_MARKET__SYMBOLS": "SOL/EUR"},
            "SOL/EUR is quoted in EUR, not in broker.currency USDT: one account holds one "
            'currency, so set broker.currency = "EUR"',
        ),
        ({"TRADER_STRATEGY__PER_SYMBOL": '{"ETH/USDT": "simple"}'}, "not in market.symbols"),
        ({"TRADER_FORECAST__DEVICE": "gpu"}, "forecast.device: 'gpu' is not auto, cpu, cuda"),
        ({"TRADER_FORECAST__QUANTILES": "0.5,1.5"}, "strictly between 0 and 1"),
        ({"TRADER_FORECAST__QUANTILES": "0.1,0.5,0.9"}, "lacks [0.2, 0.4, 0.6, 0.8], which the"),
        ({"TRADER_RISK__MAX_ORDER_NOTIONAL": "NaN"}, "risk.max_order_notional"),
        ({"TRADER_INSTANCE": "Has Space"}, "instance: use 1-63 of a-z"),
        ({"TRADER_BROKER__MODE": "yolo"}, "broker.mode: Input should be 'paper' or 'live'"),
    ],
)
def test_invalid_values_name_the_key_and_the_source(tmp_path, env, expected):
    text = problems(tmp_path, env=env)
    assert expected in text


def test_a_type_error_says_where_the_value_came_from_without_echoing_it(tmp_path):
    text = problems(tmp_path, toml='[mqtt]\nport = "hunter2-secret"\n')
    assert "mqtt.port" in text
    assert f"from file {tmp_path / 'config.toml'}" in text
    assert "hunter2-secret" not in text


def test_secrets_from_the_secrets_directory_are_masked_everywhere(tmp_path):
    loaded = load(
        tmp_path,
        secrets={
            "trader_exchange__api_key": "key-from-file\n",
            "TRADER_MQTT__PASSWORD": "mqtt-pass-from-file\r\n",
            "other_program_secret": "not ours",
            ".hidden": "ignored",
        },
        env={"TRADER_EXCHANGE__API_SECRET": "secret-from-env"},
    )
    exchange = loaded.settings.exchange
    assert exchange.api_key is not None
    assert exchange.api_key.get_secret_value() == "key-from-file"
    assert loaded.settings.mqtt.password is not None
    assert loaded.settings.mqtt.password.get_secret_value() == "mqtt-pass-from-file"
    origin = loaded.origins["exchange.api_key"]
    assert origin.kind == "secrets"
    assert origin.where.endswith("trader_exchange__api_key")
    assert sorted(loaded.secret_values()) == [
        "key-from-file",
        "mqtt-pass-from-file",
        "secret-from-env",
    ]
    for rendered in (show_text(loaded), show_json(loaded), repr(loaded.settings), str(loaded)):
        for secret in loaded.secret_values():
            assert secret not in rendered
    shown = json.loads(show_json(loaded))["settings"]
    assert shown["exchange.api_key"] == {
        "value": "**********",
        "source": f"secrets directory {tmp_path / 'secrets' / 'trader_exchange__api_key'}",
    }
    assert shown["exchange.api_secret"]["source"] == "environment (TRADER_EXCHANGE__API_SECRET)"
    assert shown["exchange.api_password"]["value"] is None


def test_an_unknown_trader_file_in_the_secrets_directory_is_an_error(tmp_path):
    text = problems(tmp_path, secrets={"TRADER_EXCHANGE__APIKEY": "x"})
    assert "unknown setting TRADER_EXCHANGE__APIKEY in secrets directory" in text


def test_the_config_file_is_the_flag_then_trader_config_then_the_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config_file(None, {}) is None
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "default.toml").write_text("")
    (tmp_path / "mine.toml").write_text("")
    assert resolve_config_file(None, {}) == Path("config/default.toml")
    assert resolve_config_file(None, {"TRADER_CONFIG": "mine.toml"}) == Path("mine.toml")
    assert resolve_config_file(Path("mine.toml"), {"TRADER_CONFIG": "x"}) == Path("mine.toml")
    with pytest.raises(ConfigError, match=r"nope.toml \(from TRADER_CONFIG\) does not exist"):
        resolve_config_file(None, {"TRADER_CONFIG": "nope.toml"})
    with pytest.raises(ConfigError, match=r"config file nope.toml does not exist"):
        resolve_config_file(Path("nope.toml"), {})


def test_the_secrets_directory_is_chosen_by_trader_then_systemd(tmp_path):
    ours, systemd = tmp_path / "ours", tmp_path / "systemd"
    ours.mkdir()
    systemd.mkdir()
    assert resolve_secrets_dir({"CREDENTIALS_DIRECTORY": str(systemd)}) == systemd
    both = {"CREDENTIALS_DIRECTORY": str(systemd), "TRADER_SECRETS_DIR": str(ours)}
    assert resolve_secrets_dir(both) == ours
    with pytest.raises(ConfigError, match="from CREDENTIALS_DIRECTORY"):
        resolve_secrets_dir({"CREDENTIALS_DIRECTORY": str(tmp_path / "gone")})


def test_a_replays_files_decide_symbols_timeframe_and_currency_over_every_layer(tmp_path):
    toml = '[broker]\ncurrency = "USD"\n[strategy]\nper_symbol = {"SOL/USDT" = "maxdiff"}\n'
    # Alone, an account in USD with the default USDT symbols is refused ...
    assert "not in broker.currency USD" in problems(tmp_path, toml=toml)
    # ... but a replay's files have the last word, before anything is validated.
    config = tmp_path / "config.toml"
    layer = data_layer(["GOOG/USD", "SPY/USD"], "1d", "GOOG.csv, SPY.csv")
    loaded = load_settings(config, environ={}, dotenv_file=None, secrets_dir=None, from_data=layer)
    market, broker = loaded.settings.market, loaded.settings.broker
    assert (market.symbols, market.timeframe, broker.currency) == (
        ["GOOG/USD", "SPY/USD"], "1d", "USD",
    )  # fmt: skip
    assert loaded.settings.strategy.per_symbol == {}  # no such symbol in this run
    assert str(loaded.origins["broker.currency"]) == "the data (GOOG.csv, SPY.csv)"
    mixed = data_layer(["GOOG/USD", "SAP/EUR"], "1d", "two files")
    with pytest.raises(ConfigError, match="quoted in EUR and USD: one account holds one currency"):
        load_settings(None, environ={}, dotenv_file=None, secrets_dir=None, from_data=mixed)


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        ({"toml": "[market]\nallow_gaps = true\n"}, "replaced by market.calendar"),
        ({"env": {"TRADER_MARKET__ALLOW_GAPS": "1"}}, "replaced by market.calendar"),
        ({"toml": '[backtest]\ncalendar = "auto"\n'}, "annualisation follows the market"),
    ],
)
def test_a_retired_setting_says_what_replaced_it(tmp_path, sources, expected):
    assert expected in problems(tmp_path, **sources)
