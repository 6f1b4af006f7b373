"""`trader evaluate --data FILE... --model M ...`: forecast skill over rolling origins."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import (
    Verbs,
    add_reading_options,
    loader,
    out_refused,
    positive,
    reading_options,
    utc_date,
    utc_end,
)

MODELS = ("baseline", "toto", "toto2", "kronos")


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    parser = verbs.add_parser(
        "evaluate",
        parents=[common],
        help="score models' forecasts against what happened (CRPS, MASE, coverage)",
        description="Every model forecasts from the same rolling origins (through the "
        "backtest's forecast cache) and is scored against the bars that came: CRPS, weighted "
        "quantile loss, MAE and MASE of the median, hit rate, interval coverage and "
        "calibration, per horizon step and overall, with block-bootstrap intervals and "
        "Diebold-Mariano tests, beside the naive no-change forecast and the baseline.",
    )
    add = parser.add_argument
    add("--data", nargs="+", type=Path, required=True, metavar="FILE", help="CSV or Parquet bars")
    add("--symbol", action="append", help="symbol of each file, in order (default: its name)")
    add("--model", action="append", choices=MODELS, default=[], metavar="M",
        help=f"a model to score ({', '.join(MODELS)}); repeat for several")  # fmt: skip
    add("--weights", action="append", type=_weights, default=[], metavar="M=DIR",
        help="checkpoint of model M (Kronos: DIR, or DIR/predictor and DIR/tokenizer)")  # fmt: skip
    add("--horizon", type=positive, metavar="H", help="bars ahead (default: forecast.horizon)")
    add("--context", type=positive, metavar="N", help="bars of context (default: "
        "market.context_bars)")  # fmt: skip
    add("--samples", type=positive, metavar="S", help="sample paths per forecast (Toto, Kronos)")
    add("--from", dest="begin", type=utc_date, metavar="D", help="first origin, UTC date or time")
    add("--to", dest="end", type=utc_end, metavar="D", help="last origin, UTC (a date: that day)")
    add("--origins", type=_origins, default=None, metavar="every|N",
        help="every bar (default), or N origins evenly spaced over the period")  # fmt: skip
    add("--json", dest="as_json", action="store_true", help="print one JSON object")
    add("--out", type=Path, metavar="DIR", help="write report.md, report.html and the plots here")
    add_reading_options(parser).set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if (refused := out_refused("evaluate", args.out)) is not None:
        return refused
    from trader.evaluate.command import EvaluateRequest, run_evaluate_command  # noqa: PLC0415

    args.log_level = args.log_level or "WARNING"
    request = EvaluateRequest(
        data=args.data,
        symbols=args.symbol,
        reading=reading_options(args),
        models=list(dict.fromkeys(args.model)),
        weights=dict(args.weights),
        horizon=args.horizon,
        context=args.context,
        samples=args.samples,
        begin=args.begin,
        end=args.end,
        origins=args.origins,
        as_json=args.as_json,
        out=args.out,
    )
    return run_evaluate_command(request, loader(args))


def _weights(text: str) -> tuple[str, Path]:
    model, sep, folder = text.partition("=")
    if not sep or model not in MODELS or not folder:
        raise argparse.ArgumentTypeError(f"{text!r} is not M=DIR with M one of {', '.join(MODELS)}")
    return model, Path(folder)


def _origins(text: str) -> int | None:
    return None if text == "every" else positive(text)
