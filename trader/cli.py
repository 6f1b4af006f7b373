"""`trader <verb>`: the daemon and its tools."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from trader import __version__
from trader.backtest.command import add_parser as add_backtest_parser
from trader.bench.parser import add_bench_parser
from trader.config import ConfigError, LoadedSettings, load_from_environment
from trader.config.loader import DataLayer
from trader.config.render import show_json, show_text, template
from trader.doctor.parser import add_doctor_parser
from trader.domain import Timeframe
from trader.logging import configure_logging
from trader.market.file_options import add_reading_options, reading_options
from trader.reconcile_cli import add_reconcile_parser
from trader.sandbox_cli import add_sandbox_parser
from trader.service import EX_CONFIG, Service


def _load(args: argparse.Namespace, from_data: DataLayer | None = None) -> LoadedSettings:
    """The settings, and logging set up by them; `from_data`: what a replay's files decide."""
    loaded = load_from_environment(args.config, from_data=from_data)
    overrides = {}
    if args.log_level:
        overrides["level"] = args.log_level
    if args.log_format:
        overrides["format"] = args.log_format
    configure_logging(
        loaded.settings.log.model_copy(update=overrides), secrets=loaded.secret_values()
    )
    return loaded


def cmd_run(args: argparse.Namespace) -> int:
    if args.replay:
        from trader.replay_cli import run_replay_command  # noqa: PLC0415 - only replay needs it

        return run_replay_command(args, lambda from_data: _load(args, from_data))
    return asyncio.run(Service(_load(args)).run())


def _utc_date(text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a date like 2024-01-31") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)


def cmd_download(args: argparse.Namespace) -> int:
    # Imported here: ccxt takes most of a second to import, and other verbs do not need it.
    from trader.market.download_cli import download_history  # noqa: PLC0415

    loaded = _load(args)
    settings = loaded.settings
    exchange_settings = settings.exchange.model_copy(
        update={"id": args.exchange or settings.exchange.id}
    )
    symbols = args.symbols.split(",") if args.symbols else settings.market.symbols
    timeframe = Timeframe(args.timeframe or settings.market.timeframe)
    return asyncio.run(
        download_history(
            exchange_settings,
            symbols,
            timeframe,
            args.since,
            args.until or datetime.now(UTC),
            args.out,
        )
    )


def cmd_forecast(args: argparse.Namespace) -> int:
    # Imported here: torch and the models load only for the verbs that need them.
    from trader.forecast.oneshot import OneShot, run_forecast_command  # noqa: PLC0415

    settings = _load(args).settings
    return run_forecast_command(
        settings.forecast,
        OneShot(
            model=args.model or settings.forecast.model,
            data=args.data,
            symbol=args.symbol,
            context=args.context or settings.market.context_bars,
            horizon=args.horizon or settings.forecast.horizon,
            samples=args.samples,
            seed=args.seed,
            device=args.device,
            weights=args.weights,
            tokenizer=args.tokenizer,
            download=args.download,
            as_json=args.json,
            reading=reading_options(args),
        ),
    )


def cmd_backtest(args: argparse.Namespace) -> int:
    from trader.backtest.command import run_backtest_command  # noqa: PLC0415 - numpy, plots

    # Decisions, orders and fills are in the backtest's ledgers: the log keeps to warnings
    # unless asked for more.
    args.log_level = args.log_level or "WARNING"
    return run_backtest_command(args, lambda from_data: _load(args, from_data))


def cmd_doctor(args: argparse.Namespace) -> int:
    from trader.doctor.command import DoctorOptions, run_doctor  # noqa: PLC0415 - torch

    loaded = _load(args)
    options = DoctorOptions(
        args.device,
        args.evidence,
        args.model,
        args.weights,
        args.tokenizer,
        args.size,
        args.data,
        inference=not args.no_inference,
    )
    return run_doctor(loaded.settings, options, loaded.secret_values())


def cmd_bench_compile(args: argparse.Namespace) -> int:
    from trader.bench.compile import run_bench_compile  # noqa: PLC0415 - torch

    return run_bench_compile(_load(args).settings, args)


def cmd_reconcile(args: argparse.Namespace) -> int:
    from trader.reconcile_cli import run_reconcile_command  # noqa: PLC0415 - ccxt for live

    return run_reconcile_command(_load(args), args)


def cmd_sandbox(args: argparse.Namespace) -> int:
    from trader.sandbox_cli import run_sandbox_command  # noqa: PLC0415 - aiohttp

    _load(args)
    return run_sandbox_command(args)


def cmd_config_show(args: argparse.Namespace) -> int:
    loaded = load_from_environment(args.config)
    sys.stdout.write(show_json(loaded) if args.json else show_text(loaded))
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    # Checks what `trader run` would load: the file with the secrets directory, .env and env.
    loaded = load_from_environment(args.file or args.config)
    checked = loaded.config_file or "defaults (no config file)"
    sys.stdout.write(f"ok: {checked} with secrets directory, .env and environment\n")
    return 0


def cmd_config_template(args: argparse.Namespace) -> int:
    sys.stdout.write(template())
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="TOML settings file (default: $TRADER_CONFIG, else config/default.toml)",
    )
    common.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    common.add_argument("--log-format", choices=["auto", "json", "console"])

    parser = argparse.ArgumentParser(
        prog="trader", description="Paper/live trading daemon driven by time-series models."
    )
    parser.add_argument("--version", action="version", version=f"trader {__version__}")
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    run = verbs.add_parser("run", parents=[common], help="run the daemon")
    run.add_argument(
        "--replay", nargs="+", type=Path, metavar="FILE", help="paper-trade recorded bars instead"
    )
    run.add_argument(
        "--symbol", action="append", help="symbol of each replay file, in order (default: its name)"
    )
    run.add_argument(
        "--speed", type=float, help="replay at this multiple of real time (default: at once)"
    )
    run.add_argument("--max-ticks", type=int, help="stop after this many ticks")
    add_reading_options(run).set_defaults(handler=cmd_run)

    fetch = verbs.add_parser(
        "download", parents=[common], help="bar history to Parquet (resumable, rate-limited)"
    )
    fetch.add_argument("--exchange", help="ccxt exchange id (default: exchange.id)")
    fetch.add_argument("--symbols", help="comma-separated (default: market.symbols)")
    fetch.add_argument("--timeframe", help="bar length (default: market.timeframe)")
    fetch.add_argument("--since", type=_utc_date, required=True, help="first bar, UTC date")
    fetch.add_argument("--until", type=_utc_date, help="end, UTC date (default: now)")
    fetch.add_argument("--out", type=Path, default=Path("data"), help="folder (default: data)")
    fetch.set_defaults(handler=cmd_download)

    forecast = verbs.add_parser(
        "forecast", parents=[common], help="one forecast of the last window of a file of bars"
    )
    forecast.add_argument("--model", choices=["toto", "kronos", "baseline"])
    forecast.add_argument("--data", type=Path, required=True, help="CSV or Parquet of bars")
    forecast.add_argument("--symbol", help="symbol of the data (default: from the file name)")
    forecast.add_argument(
        "--weights", type=Path, metavar="DIR", help="checkpoint directory (default: HF cache)"
    )
    forecast.add_argument("--tokenizer", type=Path, metavar="DIR", help="Kronos tokenizer")
    forecast.add_argument(
        "--download", action="store_true", help="fetch missing weights from the Hugging Face hub"
    )
    forecast.add_argument("--context", type=_positive, help="bars of context (the last N)")
    forecast.add_argument("--horizon", type=_positive, help="bars ahead")
    forecast.add_argument("--samples", type=_positive, help="sample paths")
    forecast.add_argument("--seed", type=int, help="sampler seed")
    forecast.add_argument("--device", help="auto, cpu, cuda or cuda:N")
    forecast.add_argument("--json", action="store_true", help="print JSON")
    add_reading_options(forecast).set_defaults(handler=cmd_forecast)

    add_backtest_parser(verbs, common).set_defaults(handler=cmd_backtest)

    add_doctor_parser(verbs, common).set_defaults(handler=cmd_doctor)
    add_bench_parser(verbs, common).set_defaults(handler=cmd_bench_compile)

    add_reconcile_parser(verbs, common).set_defaults(handler=cmd_reconcile)
    add_sandbox_parser(verbs, common).set_defaults(handler=cmd_sandbox)

    config = verbs.add_parser("config", help="show or check the settings")
    config_verbs = config.add_subparsers(dest="config_verb", required=True, metavar="ACTION")
    show = config_verbs.add_parser(
        "show", parents=[common], help="effective settings, secrets masked, with their sources"
    )
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(handler=cmd_config_show)
    check = config_verbs.add_parser(
        "check", parents=[common], help="validate the settings; exit non-zero with the errors"
    )
    check.add_argument("file", nargs="?", type=Path, help="TOML file to check")
    check.set_defaults(handler=cmd_config_check)
    tmpl = config_verbs.add_parser(
        "template", help="every setting with its default, as commented TOML"
    )
    tmpl.set_defaults(handler=cmd_config_template)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
    except ConfigError as error:
        sys.stderr.write("trader: invalid settings:\n")
        sys.stderr.writelines(f"  - {problem}\n" for problem in error.problems)
        return EX_CONFIG
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
