"""Keys only where keys belong, and strict inputs: a live key in a config file is refused even
when the environment overrides it, `config check` warns about secrets in files in paper mode
too, an unparseable `.env` line is an error naming file and line, secrets with control
characters or of an unlikely size are refused by setting name, and every missing part of the
live opt-in is named at once. No secret value appears in any of the answers."""

from __future__ import annotations

import os

import pytest
from structlog.testing import capture_logs

from trader.cli import main
from trader.config.loader import load_settings
from trader.config.schema import Settings
from trader.config.strict import config_refusal
from trader.service.service import Service

KEY, SECRET = "key-in-a-file-0001", "secret-in-a-file-0002"
LIVE = '[broker]\nmode = "live"\nlive_confirmation = true\n'
KEYS = f'[exchange]\napi_key = "{KEY}"\napi_secret = "{SECRET}"\n'


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The CLI in process, in a folder of its own, with none of the developer's settings."""
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith(("TRADER_", "CREDENTIALS_DIRECTORY")):
            monkeypatch.delenv(name)
    return tmp_path


def check(capsys, *args: str) -> tuple[int, str]:
    code = main(["config", "check", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


async def test_a_live_key_in_a_config_file_is_refused_even_when_the_environment_overrides_it(
    tmp_path,
):
    (tmp_path / "live.toml").write_text(LIVE + KEYS)
    environ = {
        "TRADER_EXCHANGE__API_KEY": "key-from-the-environment",
        "TRADER_EXCHANGE__API_SECRET": "secret-from-the-environment",
        "TRADER_EXCHANGE__API_BASE_URL": "http://127.0.0.1:9",  # never reached
        "TRADER_LEDGER__PATH": str(tmp_path / "ledger.sqlite3"),
    }
    loaded = load_settings(
        tmp_path / "live.toml", environ=environ, dotenv_file=None, secrets_dir=None
    )
    assert loaded.origins["exchange.api_key"].kind == "env"  # the file's key is overridden
    with capture_logs() as logs:
        code = await Service(loaded).run()  # the daemon, in process
    assert code == 78
    [refused] = [entry for entry in logs if entry["event"] == "refusing to start"]
    assert "exchange.api_key is in a config file" in refused["reason"]
    assert "exchange.api_secret is in a config file" in refused["reason"]
    secrets = (
        KEY,
        SECRET,
        environ["TRADER_EXCHANGE__API_KEY"],
        environ["TRADER_EXCHANGE__API_SECRET"],
    )
    for value in secrets:
        assert value not in repr(logs)


def test_config_check_warns_about_secrets_in_files_in_paper_mode_too(home, capsys):
    (home / "paper.toml").write_text(KEYS + '[mqtt]\npassword = "broker-password-3"\n')
    code, said = check(capsys, "paper.toml")
    assert code == 0
    for key in ("exchange.api_key", "exchange.api_secret", "mqtt.password"):
        assert f"warning: {key} is set in config file paper.toml" in said
    (home / "live.toml").write_text(LIVE + KEYS)
    code, said = check(capsys, "live.toml")
    assert code == 78
    assert "live trading would be refused" in said
    for value in (KEY, SECRET, "broker-password-3"):
        assert value not in said


def test_an_unparseable_env_line_is_an_error_naming_file_and_line(home, capsys):
    (home / ".env").write_text(
        "TRADER_MARKET__TIMEFRAME=1h\nthis line holds s3cret-looking words\nTRADER_INSTANCE=x\n"
    )
    code, said = check(capsys)
    assert code == 78
    assert ".env file .env: line 2 cannot be parsed" in said
    assert "s3cret" not in said


@pytest.mark.parametrize(
    ("variable", "value", "problem"),
    [
        ("TRADER_MQTT__PASSWORD", "first-line\nsecond-line", "has control characters"),
        ("TRADER_EXCHANGE__API_SECRET", "tab\tinside-it", "has control characters"),
        ("TRADER_EXCHANGE__API_KEY", "k" * 100_000, "is longer than 4096 characters"),
        # The Unicode controls and separators a line-oriented tool may split or hide (Python's
        # own str.splitlines splits at U+0085, U+2028, U+2029; categories Cc, Zl, Zp, Cf).
        ("TRADER_MQTT__PASSWORD", "next-line\u0085inside-it", "has control characters"),
        ("TRADER_MQTT__COMMAND_SECRET", "line-separator\u2028inside-it", "has control characters"),
        ("TRADER_EXCHANGE__API_SECRET", "paragraph\u2029separator", "has control characters"),
        ("TRADER_EXCHANGE__API_KEY", "zero-width\u200bspace-inside", "has control characters"),
        ("TRADER_EXCHANGE__API_KEY", "\ufeffbyte-order-mark-first", "has control characters"),
        ("TRADER_EXCHANGE__API_SECRET", "c1-control\u009binside-it", "has control characters"),
    ],
)
def test_a_secret_with_control_characters_or_too_long_is_refused_by_name(
    home, capsys, monkeypatch, variable, value, problem
):
    monkeypatch.setenv(variable, value)
    code, said = check(capsys)
    assert code == 78
    key = variable.removeprefix("TRADER_").lower().replace("__", ".")
    assert f"{key} (from environment ({variable})) {problem}" in said
    assert value[:12] not in said


def test_a_huge_secret_file_is_refused_by_name_without_reading_it_all(home, capsys, monkeypatch):
    secrets = home / "secrets"
    secrets.mkdir()
    (secrets / "TRADER_EXCHANGE__API_SECRET").write_bytes(b"s" * 5_000_000)
    monkeypatch.setenv("TRADER_SECRETS_DIR", str(secrets))
    code, said = check(capsys)
    assert code == 78
    assert "TRADER_EXCHANGE__API_SECRET is over 4096 characters" in said
    assert "sssssssss" not in said


def test_live_mode_with_nothing_else_names_every_missing_part_at_once():
    reason = config_refusal(Settings(broker={"mode": "live"}), {}) or ""
    for missing in ("broker.live_confirmation = true", "exchange.api_key", "exchange.api_secret"):
        assert missing in reason


@pytest.mark.parametrize(
    ("prefix", "problem"),
    [
        ("trader/+", "'+'"),
        ("#", "'#'"),
        ("plant/#", "'#'"),
        ("/trader", "an empty level"),
        ("trader/", "an empty level"),
        ("trader//one", "an empty level"),
        ("", "an empty level"),
        ("tra\x00der", "NUL"),
    ],
)
def test_a_topic_prefix_with_wildcards_or_empty_levels_is_refused(home, capsys, prefix, problem):
    """A prefix with a wildcard would subscribe the daemon to other daemons' command topics,
    and an empty level makes topics an ACL written for `<prefix>/+/cmd` does not match."""
    toml = prefix.replace("\x00", "\\u0000")  # TOML's escape: the file itself holds no NUL
    (home / "mqtt.toml").write_text(f'[mqtt]\ntopic_prefix = "{toml}"\n')
    code, said = check(capsys, "mqtt.toml")
    assert code == 78
    assert "mqtt.topic_prefix" in said
    assert problem in said


def test_a_topic_prefix_of_several_levels_is_accepted():
    assert Settings(mqtt={"topic_prefix": "plant-7/trading/v1"}).mqtt.topic_prefix == (
        "plant-7/trading/v1"
    )
