"""`trader evaluate --data FILE... --model M ...`: the models' skill over rolling origins, as a
table, one JSON object (--json) and, with --out, a report folder (`trader.cli.evaluate` reads
the arguments). Bad input is told before torch and the models load: exit 2 for a request that
cannot be met as asked, 65 for data that leaves nothing to score."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trader.exit_codes import EX_ARGUMENTS, EX_CANTCREAT, EX_DATAERR, EX_UNAVAILABLE
from trader.private_files import UnsafePath

if TYPE_CHECKING:
    from trader.config import LoadedSettings
    from trader.config.loader import DataLayer
    from trader.config.schema import Settings
    from trader.forecast.protocol import Forecaster
    from trader.market.files.options import ReadOptions

MODELS = ("baseline", "toto", "toto2", "kronos")
REFERENCE = "baseline"  # always evaluated, beside the naive no-change forecast


@dataclass(frozen=True)
class EvaluateRequest:
    data: list[Path]
    symbols: list[str] | None
    reading: ReadOptions
    models: list[str]
    weights: Mapping[str, Path] = field(default_factory=dict)
    horizon: int | None = None
    context: int | None = None
    samples: int | None = None
    begin: datetime | None = None
    end: datetime | None = None
    origins: int | None = None  # None: every bar
    as_json: bool = False
    out: Path | None = None


class Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _check(request: EvaluateRequest) -> None:
    if request.begin and request.end and request.begin > request.end:
        raise Refused(EX_ARGUMENTS, f"--from {request.begin} is after --to {request.end}")
    unknown = sorted(set(request.weights) - set(request.models) - {REFERENCE})
    if unknown:
        raise Refused(EX_ARGUMENTS, f"--weights for {', '.join(unknown)}, not asked for by --model")
    for model, folder in request.weights.items():
        if not folder.is_dir():
            raise Refused(EX_ARGUMENTS, f"--weights {model}={folder}: no such directory")


def _settings(settings: Settings, request: EvaluateRequest) -> Settings:
    from trader.config.forecast_settings import default_levels  # noqa: PLC0415

    forecast: dict[str, Any] = {}
    market: dict[str, Any] = {}
    # The device is chosen for the heaviest model asked for (the baseline runs anywhere).
    forecast["model"] = next((m for m in request.models if m != REFERENCE), REFERENCE)
    if "quantiles" not in settings.forecast.model_fields_set:
        # Every model is scored at the same levels: those that all of them forecast.
        forecast["quantiles"] = default_levels([REFERENCE, *request.models])
    if request.horizon is not None:
        forecast["horizon"] = request.horizon
    if request.samples is not None:
        forecast["toto"] = settings.forecast.toto.model_copy(
            update={"num_samples": request.samples}
        )
        forecast["kronos"] = settings.forecast.kronos.model_copy(
            update={"sample_count": request.samples}
        )
    if request.context is not None:
        market["context_bars"] = request.context
        market["min_contiguous_bars"] = min(settings.market.min_contiguous_bars, request.context)
    updated = settings.model_copy(
        update={
            "forecast": settings.forecast.model_copy(update=forecast),
            "market": settings.market.model_copy(update=market),
        }
    )
    from pydantic import ValidationError  # noqa: PLC0415

    try:
        return type(settings).model_validate(updated.model_dump())
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        raise Refused(EX_ARGUMENTS, f"--horizon/--context/--samples: {problems}") from None


def _paths(model: str, folder: Path | None) -> tuple[Path | None, Path | None]:
    """A Kronos folder may hold `predictor/` and `tokenizer/` (as `trader finetune` and random
    checkpoints write them)."""
    from trader.forecast.weights import kronos_pair  # noqa: PLC0415

    pair = kronos_pair(folder) if model == "kronos" else None
    return pair if pair is not None else (folder, None)


def _forecasters(settings: Settings, request: EvaluateRequest) -> list[Forecaster]:
    from trader.forecast.build import ModelUnavailable, build_forecaster  # noqa: PLC0415
    from trader.forecast.device_choice import DeviceUnavailable  # noqa: PLC0415
    from trader.forecast.provenance import origins  # noqa: PLC0415
    from trader.runner import model_device  # noqa: PLC0415

    try:
        device = model_device(settings)
    except DeviceUnavailable as error:
        raise Refused(EX_UNAVAILABLE, str(error)) from None
    built = []
    for model in dict.fromkeys([REFERENCE, *request.models]):
        weights = request.weights.get(model)
        path, tokenizer = _paths(model, weights)
        for origin in origins(model, settings.forecast, model_path=path, tokenizer_path=tokenizer):
            sys.stderr.writelines(f"{line}\n" for line in origin.lines())  # said first
        try:
            built.append(build_forecaster(
                model, settings.forecast, device, model_path=path, tokenizer_path=tokenizer
            ))  # fmt: skip
        except ModelUnavailable as error:
            hint = (
                f"; give --weights {model}=DIR, or fetch them: trader forecast --model "
                f"{model} --download --data FILE"
                if weights is None
                else ""
            )
            raise Refused(EX_ARGUMENTS, f"{error}{hint}") from None
    return built


def run_evaluate_command(
    request: EvaluateRequest, load: Callable[[DataLayer], LoadedSettings]
) -> int:
    from trader.market.replay import (  # noqa: PLC0415
        RecordingsRequestError,
        ReplayDataError,
        read_recordings,
        settings_from,
    )

    try:
        _check(request)
        try:
            recordings = read_recordings(request.data, request.symbols, request.reading)
        except RecordingsRequestError as error:
            raise Refused(EX_ARGUMENTS, f"{error} (--data FILE, --symbol NAME)") from None
        except ReplayDataError as error:
            raise Refused(EX_DATAERR, str(error)) from None
        settings = _settings(load(settings_from(recordings)).settings, request)
        return _evaluate(request, settings, {r.symbol: r for r in recordings})
    except Refused as refused:
        sys.stderr.write(f"trader evaluate: {refused}\n")
        return refused.code


def _evaluate(request: EvaluateRequest, settings: Settings, recordings: Mapping[str, Any]) -> int:
    # Imported here: numpy, torch and matplotlib load only for this verb.
    from trader.evaluate.report import (  # noqa: PLC0415
        dumps,
        evaluation_json,
        terminal_summary,
        write_report,
    )
    from trader.evaluate.run import EvaluationError, evaluate  # noqa: PLC0415

    forecasters = _forecasters(settings, request)
    try:
        result = evaluate(
            settings, recordings, forecasters, begin=request.begin, end=request.end,
            count=request.origins,
        )  # fmt: skip
    except EvaluationError as error:
        raise Refused(EX_DATAERR, str(error)) from None
    except ValueError as error:  # files that cannot share a run, a model refusing the data
        raise Refused(EX_DATAERR, str(error)) from None
    if request.as_json:
        sys.stdout.write(dumps(evaluation_json(result)))
    else:
        sys.stdout.write(terminal_summary(result))
    if request.out is not None:
        try:
            write_report(result, request.out)
        except (UnsafePath, OSError) as error:  # a link planted in --out, a disk that refuses
            raise Refused(EX_CANTCREAT, f"the report was not written: {error}") from None
        sys.stderr.write(f"report: {request.out / 'report.html'} (and report.md, plots)\n")
    return 0
