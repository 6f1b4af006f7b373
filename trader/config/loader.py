"""Layer the settings sources, lowest to highest priority, remembering where each value came from:

    defaults < TOML file < secrets directory < .env < environment

The secrets directory, .env and the environment use the same names (`TRADER_MARKET__ADD_LATEST`,
case-insensitive); the seed system's `ADD_LATEST` and `TOTO_DISABLE_COMPILE` work in .env and
the environment. An unknown key or name is an error that names it and where it was found, and
so is a `.env` line that cannot be parsed, or a secret with control characters or over 4 KiB
(`strict.py`). Errors never echo the offending value: it may be a secret.
"""

from __future__ import annotations

import difflib
import io
import json
import os
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from dotenv import dotenv_values
from pydantic import SecretStr, ValidationError

from trader.config.fields import ENV_PREFIX, KeyPath, Leaf, leaves, sections
from trader.config.schema import Settings
from trader.config.strict import (
    MAX_SECRET_CHARS,
    dotenv_problems,
    secret_problems,
    secrets_in,
)
from trader.domain import DomainError, account_currency

DEFAULT_CONFIG_FILE = Path("config/default.toml")
DOCKER_SECRETS_DIR = Path("/run/secrets")
# Environment variables that steer loading itself rather than name a setting.
LOADER_VARIABLES = frozenset({"TRADER_CONFIG", "TRADER_SECRETS_DIR"})


class ConfigError(Exception):
    """Settings that cannot be loaded; `problems` are readable lines that name key and source."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


SourceKind = Literal["default", "file", "secrets", "dotenv", "env", "data"]


@dataclass(frozen=True)
class Origin:
    kind: SourceKind
    where: str = ""  # file path, secret file, or variable name
    name: str = ""  # the variable name inside a .env file

    def __str__(self) -> str:
        match self.kind:
            case "default":
                return "default"
            case "file":
                return f"file {self.where}"
            case "secrets":
                return f"secrets directory {self.where}"
            case "dotenv":
                return f".env file {self.where} ({self.name})"
            case "env":
                return f"environment ({self.where})"
            case "data":
                return f"the data ({self.where})"


DEFAULT = Origin("default")
Values = dict[KeyPath, tuple[object, Origin]]
# What a replay's own files decide, given the other layers' values (see `data_layer`).
DataLayer = Callable[[Values], Values]


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    origins: Mapping[str, Origin]  # dotted key -> where its value came from
    config_file: Path | None
    secrets_dir: Path | None
    dotenv_file: Path | None
    # Secret settings a config file sets (key -> file), even where another source overrides
    # them: live trading refuses exchange keys there, `config check` warns about any.
    secrets_in_files: Mapping[str, str] = field(default_factory=dict)

    def secret_values(self) -> list[str]:
        """Every secret that is set, for redaction in logs."""
        values = (leaf.read(self.settings) for leaf in leaves().values() if leaf.is_secret)
        return [
            v.get_secret_value()
            for v in values
            if isinstance(v, SecretStr) and v.get_secret_value()
        ]


# --- where the sources are ----------------------------------------------------------------


def resolve_config_file(cli_path: Path | None, environ: Mapping[str, str]) -> Path | None:
    """--config, else $TRADER_CONFIG, else config/default.toml when it exists."""
    if cli_path is not None:
        chosen, how = cli_path, ""
    elif environ.get("TRADER_CONFIG"):
        chosen, how = Path(environ["TRADER_CONFIG"]), " (from TRADER_CONFIG)"
    else:
        return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None
    if not chosen.is_file():
        raise ConfigError([f"config file {chosen}{how} does not exist"])
    return chosen


def resolve_secrets_dir(environ: Mapping[str, str]) -> Path | None:
    """$TRADER_SECRETS_DIR, else systemd's $CREDENTIALS_DIRECTORY, else Docker's /run/secrets."""
    for variable in ("TRADER_SECRETS_DIR", "CREDENTIALS_DIRECTORY"):
        if environ.get(variable):
            path = Path(environ[variable])
            if not path.is_dir():
                raise ConfigError([f"secrets directory {path} (from {variable}) does not exist"])
            return path
    return DOCKER_SECRETS_DIR if DOCKER_SECRETS_DIR.is_dir() else None


# --- the seed system's names ---------------------------------------------------------------


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError("expected 1 or 0")


@dataclass(frozen=True)
class Alias:
    path: KeyPath
    convert: Callable[[str], object]


ALIASES: Mapping[str, Alias] = {
    "ADD_LATEST": Alias(("market", "add_latest"), _flag),
    "TOTO_DISABLE_COMPILE": Alias(
        ("forecast", "toto", "runtime"), lambda text: "eager" if _flag(text) else "compile"
    ),
}


# --- the layers ----------------------------------------------------------------------------


# Settings that were replaced: naming one says what replaced it, not just "unknown".
RETIRED: Mapping[str, str] = {
    "market.allow_gaps": "replaced by market.calendar (sessions, so breaks are not gaps) and "
    "market.gap_policy (what a missing bar does)",
    "backtest.calendar": "replaced by market.calendar: annualisation follows the market's "
    "trading calendar",
    "backtest.trading_days_per_year": "replaced by market.calendar: the calendar's own "
    "sessions a year are used",
}


def _suggest(word: str, candidates: Iterable[str]) -> str:
    retired = RETIRED.get(word) or RETIRED.get(_dotted(word))
    if retired is not None:
        return f" ({retired})"
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _dotted(env_name: str) -> str:
    """TRADER_MARKET__ALLOW_GAPS -> market.allow_gaps."""
    return env_name.removeprefix(ENV_PREFIX).lower().replace("__", ".")


def _parse_container(leaf: Leaf, text: str) -> object:
    """Lists and tables from a string: JSON, or comma-separated for lists."""
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError as error:
            raise ValueError(f"is not valid JSON ({error.msg})") from None
    if leaf.container is dict:
        raise ValueError('expects a JSON object, e.g. {"SOL/USDT": "maxdiff"}')
    return [item.strip() for item in stripped.split(",") if item.strip()]


def toml_layer(path: Path, problems: list[str]) -> Values:
    try:
        with path.open("rb") as handle:
            document = tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        problems.append(f"{path}: not valid TOML: {error}")
        return {}
    except OSError as error:
        problems.append(f"{path}: cannot be read: {error.strerror}")
        return {}
    values: Values = {}
    origin = Origin("file", str(path))
    all_keys = [leaf.key for leaf in leaves().values()] + [".".join(s) for s in sections()]

    def walk(table: Mapping[str, Any], prefix: KeyPath) -> None:
        for name, value in table.items():
            path_ = (*prefix, name)
            key = ".".join(path_)
            if path_ in sections():
                if isinstance(value, dict):
                    walk(value, path_)
                else:
                    problems.append(f"{path}: [{key}] is a table of settings, not a value")
            elif path_ in leaves():
                values[path_] = (value, origin)
            else:
                problems.append(f"{path}: unknown key '{key}'{_suggest(key, all_keys)}")

    walk(document, ())
    return values


def named_layer(
    entries: Mapping[str, str | None],
    origin_of: Callable[[str], Origin],
    where: str,
    problems: list[str],
    *,
    aliases: bool,
) -> Values:
    """Values from NAME=value entries (environment, .env, secret files)."""
    by_name = {leaf.env_name: leaf for leaf in leaves().values()}
    values: Values = {}
    set_by: dict[KeyPath, str] = {}
    for raw_name, text in entries.items():
        name = raw_name.upper()
        if text is None:
            continue
        alias = ALIASES.get(name) if aliases else None
        leaf = by_name.get(name)
        if alias is not None:
            path = alias.path
            try:
                value: object = alias.convert(text)
            except ValueError as error:
                problems.append(f"{raw_name} in {where}: {error}")
                continue
        elif leaf is not None:
            path = leaf.path
            value = text
            if leaf.container is not None:
                try:
                    value = _parse_container(leaf, text)
                except ValueError as error:
                    problems.append(f"{raw_name} in {where}: {error}")
                    continue
        else:
            # Other programs' variables are none of our business; a misspelt one of ours is.
            if name.startswith(ENV_PREFIX) and name not in LOADER_VARIABLES:
                problems.append(f"unknown setting {raw_name} in {where}{_suggest(name, by_name)}")
            continue
        if path in set_by:
            problems.append(f"{set_by[path]} and {raw_name} are both set in {where}: keep one")
            continue
        set_by[path] = raw_name
        values[path] = (value, origin_of(raw_name))
    return values


def secrets_layer(directory: Path, problems: list[str]) -> Values:
    """One file per setting, named like its environment variable (systemd credentials, Docker
    secrets). Files of other programs are ignored; trailing newlines are not part of a secret."""
    entries: dict[str, str | None] = {}
    paths: dict[str, Path] = {}
    for path in sorted(directory.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        if not path.name.upper().startswith(ENV_PREFIX):
            continue
        try:
            with path.open("rb") as handle:  # a bounded read: a wrong file may be huge
                data = handle.read(MAX_SECRET_CHARS * 4 + 3)
            text = data.decode("utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as error:
            problems.append(f"secret file {path} cannot be read: {error}")
            continue
        if len(data) > MAX_SECRET_CHARS * 4 + 2:
            problems.append(f"secret file {path} is over {MAX_SECRET_CHARS} characters: refused")
            continue
        entries[path.name] = text
        paths[path.name] = path
    where = f"secrets directory {directory}"
    return named_layer(
        entries, lambda name: Origin("secrets", str(paths[name])), where, problems, aliases=False
    )


def dotenv_layer(path: Path, problems: list[str]) -> Values:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        problems.append(f".env file {path} cannot be read: {error}")
        return {}
    unparsed = dotenv_problems(path, text)
    if unparsed:
        problems.extend(unparsed)
        return {}
    entries = dotenv_values(stream=io.StringIO(text))
    where = f".env file {path}"
    return named_layer(
        entries, lambda name: Origin("dotenv", str(path), name), where, problems, aliases=True
    )


def env_layer(environ: Mapping[str, str], problems: list[str]) -> Values:
    return named_layer(
        dict(environ), lambda name: Origin("env", name), "the environment", problems, aliases=True
    )


# --- merge and validate --------------------------------------------------------------------


def _nest(values: Values) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path, (value, _) in values.items():
        table = root
        for part in path[:-1]:
            table = table.setdefault(part, {})
        table[path[-1]] = value
    return root


def _describe(error: Mapping[str, Any], values: Values) -> str:
    loc = tuple(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    for end in range(len(loc), 0, -1):
        if loc[:end] in leaves():
            where = values.get(loc[:end], (None, DEFAULT))[1]
            return f"{'.'.join(loc)}: {message} (from {where})"
    return f"{'.'.join(loc) + ': ' if loc else ''}{message}"


def load_settings(
    config_file: Path | None,
    *,
    environ: Mapping[str, str],
    dotenv_file: Path | None,
    secrets_dir: Path | None,
    from_data: DataLayer | None = None,
) -> LoadedSettings:
    """Settings from the given sources (pass None to leave a source out). `from_data`: what
    a replay's own files decide (its symbols, timeframe, currency), given the other layers'
    values; it has the last word, before anything is validated, so a default symbol list
    never stands in a backtest's way."""
    problems: list[str] = []
    layers: list[Values] = []
    in_files: dict[str, str] = {}
    if config_file is not None:
        layers.append(toml_layer(config_file, problems))
        in_files = secrets_in(layers[-1], str(config_file))
    if secrets_dir is not None:
        layers.append(secrets_layer(secrets_dir, problems))
    if dotenv_file is not None and dotenv_file.is_file():
        layers.append(dotenv_layer(dotenv_file, problems))
    layers.append(env_layer(environ, problems))
    merged: Values = {}
    for layer in layers:
        problems.extend(secret_problems(layer))
        merged |= layer
    if problems:
        raise ConfigError(problems)
    if from_data is not None:
        merged |= from_data(merged)
    try:
        settings = Settings(**_nest(merged))
    except ValidationError as error:
        # include_input=False: the value may be a secret.
        errors = error.errors(include_input=False, include_url=False)
        raise ConfigError(_describe(e, merged) for e in errors) from None
    origins = {leaf.key: merged.get(path, (None, DEFAULT))[1] for path, leaf in leaves().items()}
    dotenv = dotenv_file if dotenv_file is not None and dotenv_file.is_file() else None
    return LoadedSettings(settings, origins, config_file, secrets_dir, dotenv, in_files)


def data_layer(symbols: Sequence[str], timeframe: str, source: str) -> DataLayer:
    """What a replay's files decide: its symbols and timeframe, and an account in the
    symbols' quote currency (there is no conversion: symbols quoted in different currencies
    cannot share one account). Per-symbol strategies of other symbols are dropped."""
    origin = Origin("data", source)

    def layer(merged: Values) -> Values:
        try:
            currency = account_currency(symbols)
        except DomainError as error:
            raise ConfigError([str(error)]) from None
        values: Values = {
            ("market", "symbols"): (list(symbols), origin),
            ("market", "timeframe"): (timeframe, origin),
            ("broker", "currency"): (currency, origin),
        }
        chosen = merged.get(("strategy", "per_symbol"))
        if chosen is not None and isinstance(chosen[0], Mapping):
            kept = {s: name for s, name in chosen[0].items() if s in symbols}
            values[("strategy", "per_symbol")] = (kept, chosen[1])
        return values

    return layer


def load_from_environment(
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    from_data: DataLayer | None = None,
) -> LoadedSettings:
    """What the CLI and the daemon load: the sources found from the process environment."""
    env = dict(os.environ if environ is None else environ)
    return load_settings(
        resolve_config_file(config_file, env),
        environ=env,
        dotenv_file=Path(".env"),
        secrets_dir=resolve_secrets_dir(env),
        from_data=from_data,
    )
