"""`trader bench compile`: one model eager against compiled, on the same ticks, each runtime in
a fresh process; a table, a JSON report and a recommendation by a stated rule.

The rule (`RULE`): compile only when, after warm-up, torch reports no recompiles, no graph
breaks and no CUDA-graph skips, the forecasts agree with eager ones, and the median tick is at
least `SPEEDUP` times faster. `--mode production-check` exits 1 when compiling fails it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from trader.bench.compile_worker import PREFIX, WorkerSpec
from trader.bench.workload import SYMBOLS, Workload, workload
from trader.config.forecast_settings import ForecastSettings
from trader.config.schema import Settings
from trader.exit_codes import EX_SOFTWARE, EX_UNAVAILABLE
from trader.forecast.device import choose_device
from trader.forecast.device_choice import DeviceUnavailable
from trader.forecast.random_weights import Weights, weights_or_random
from trader.private_files import write_file

SPEEDUP = 1.5
AGREEMENT = 1e-3  # largest quantile difference, relative to the eager quantile
RULE = (
    f"compile only with 0 recompiles, 0 graph breaks and 0 CUDA-graph skips after warm-up, "
    f"forecasts within {AGREEMENT:.0e} (relative) of eager ones, and a p50 tick at least "
    f"{SPEEDUP}x faster than eager"
)
RUNTIMES = ("eager", "compile")
EX_RULE_FAILED = 1


@dataclass(frozen=True)
class CompileBenchRequest:
    """What `trader bench compile` was asked; None: the settings' value (or random weights)."""

    model: str
    mode: str  # "quick" or "production-check"
    device: str | None = None
    compile_mode: str | None = None
    samples: int | None = None
    horizons: list[int] | None = None
    data: Path | None = None
    weights: Path | None = None
    tokenizer: Path | None = None
    size: str = "published"  # the random weights' architecture, without real ones
    out: Path | None = None


@dataclass(frozen=True)
class Advice:
    compile: bool
    failures: tuple[str, ...]  # the parts of the rule the compiled runtime fails

    @property
    def text(self) -> str:
        if self.compile:
            return "compile: it passes every part of the rule"
        return "keep eager: " + "; ".join(self.failures)


def advise(eager: dict[str, Any], compiled: dict[str, Any], agreement: float) -> Advice:
    after = compiled["after_warmup"]
    failures = []
    for key, label in (
        ("recompiles", "recompiles"),
        ("graph_breaks", "graph breaks"),
        ("cudagraph_skips", "CUDA-graph skips"),
    ):
        if after[key]:
            failures.append(f"{after[key]} {label} after warm-up")
    if after["forced_eager"] or compiled["mode_at_end"] != "compile":
        failures.append(f"torch stopped compiling it: {after['forced_eager']}")
    if not agreement <= AGREEMENT:  # NaN fails too
        failures.append(f"forecasts differ from eager by {agreement:.1e} (> {AGREEMENT:.0e})")
    speedup = eager["p50_ms"] / compiled["p50_ms"]
    if speedup < SPEEDUP:
        failures.append(f"p50 only {speedup:.2f}x eager's (needs >= {SPEEDUP}x)")
    return Advice(not failures, tuple(failures))


def agreement_of(eager: dict[str, Any], compiled: dict[str, Any]) -> float:
    """The largest difference between the two runtimes' quantiles over every tick, relative
    to the eager value (prices: never near zero)."""
    worst = 0.0
    for mine, theirs in zip(eager["outputs"], compiled["outputs"], strict=True):
        if len(mine) != len(theirs):
            return float("inf")
        for a, b in zip(mine, theirs, strict=True):
            worst = max(worst, abs(a - b) / max(abs(a), 1e-12))
    return worst


class Worker:
    """A worker process of one runtime, driven tick by tick."""

    def __init__(self, spec: WorkerSpec, stderr: IO[str]) -> None:
        self.spec = spec
        self._stderr = stderr
        command = [sys.executable, "-m", "trader.bench.compile_worker", json.dumps(asdict(spec))]
        self._process = subprocess.Popen(  # noqa: S603 - our own module, our own arguments
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True
        )

    def ask(self, command: str | None) -> str:
        """Send `command` (None: only listen); the worker's next line."""
        process = self._process
        assert process.stdin is not None
        assert process.stdout is not None
        if command is not None:
            process.stdin.write(command + "\n")
            process.stdin.flush()
        line = process.stdout.readline()
        while line and not line.startswith(PREFIX):  # a library printing to stdout
            line = process.stdout.readline()
        if not line:
            process.wait()
            self._stderr.seek(0)
            tail = "\n".join(self._stderr.read().strip().splitlines()[-15:])
            raise RuntimeError(
                f"the {self.spec.runtime} worker failed (exit {process.returncode}):\n{tail}"
            )
        return line.removeprefix(PREFIX).strip()

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()


def _side_by_side(specs: list[WorkerSpec], ticks: int) -> list[dict[str, Any]]:
    """Each runtime's report; every tick runs in one worker, then the other (the order turns
    each tick), so both meet the same load."""
    with tempfile.TemporaryFile("w+") as err_a, tempfile.TemporaryFile("w+") as err_b:
        workers = [Worker(spec, err) for spec, err in zip(specs, (err_a, err_b), strict=True)]
        try:
            for worker in workers:
                if worker.ask(None) != "ready":
                    raise RuntimeError(f"the {worker.spec.runtime} worker did not start")
            for tick in range(ticks):
                for worker in workers if tick % 2 == 0 else workers[::-1]:
                    worker.ask(str(tick))
            reports: list[dict[str, Any]] = [json.loads(w.ask("report")) for w in workers]
            return reports
        finally:
            for worker in workers:
                worker.close()


def _settings(base: ForecastSettings, args: CompileBenchRequest) -> ForecastSettings:
    toto, toto2, kronos = base.toto, base.toto2, base.kronos
    if args.compile_mode:
        toto = toto.model_copy(update={"compile_mode": args.compile_mode})
        toto2 = toto2.model_copy(update={"compile_mode": args.compile_mode})
        kronos = kronos.model_copy(update={"compile_mode": args.compile_mode})
    if args.samples:
        toto = toto.model_copy(update={"num_samples": args.samples})
        kronos = kronos.model_copy(update={"sample_count": args.samples})
    return base.model_copy(
        update={"toto": toto, "toto2": toto2, "kronos": kronos, "hf_token": None}
    )


def run_bench_compile(settings: Settings, args: CompileBenchRequest) -> int:
    forecast = _settings(settings.forecast, args)
    requested = args.device or forecast.device
    try:
        choice = choose_device(requested, forecast.precision)
    except DeviceUnavailable as error:
        sys.stderr.write(f"trader bench compile: {error}\n")
        return EX_UNAVAILABLE
    device = str(choice.device)
    horizons = args.horizons or [forecast.horizon]
    work = workload(
        args.mode, settings.market.context_bars, horizons, settings.market.timeframe, args.data
    )
    with tempfile.TemporaryDirectory(prefix="trader-bench-") as scratch:
        weights = weights_or_random(
            args.model,
            forecast,
            Path(scratch),
            weights=args.weights,
            tokenizer=args.tokenizer,
            size=args.size,
        )
        sys.stderr.write(f"trader bench compile: {args.model} on {device}; {weights.label}\n")
        specs = [_spec(args.model, r, device, forecast, weights, work) for r in RUNTIMES]
        try:
            eager, compiled = _side_by_side(specs, len(work.ticks))
        except RuntimeError as error:
            sys.stderr.write(f"trader bench compile: {error}\n")
            return EX_SOFTWARE
    agreement = agreement_of(eager, compiled)
    advice = advise(eager, compiled, agreement)
    report = {
        "model": args.model,
        "mode": args.mode,
        "device": choice.describe(),
        "compile_mode": _compile_mode(args.model, forecast),
        "weights": weights.label,
        "random_weights": weights.random,
        "workload": _describe(work, args.model, forecast),
        "eager": _summary(eager),
        "compile": _summary(compiled),
        "speedup_p50": eager["p50_ms"] / compiled["p50_ms"],
        "speedup_p99": eager["p99_ms"] / compiled["p99_ms"],
        "agreement_max_relative_difference": agreement,
        "rule": RULE,
        "recommendation": "compile" if advice.compile else "eager",
        "advice": advice.text,
    }
    out = args.out or Path("var/bench") / f"compile-{args.model}-{choice.device.type}.json"
    write_file(out, json.dumps(report, indent=2) + "\n", what="--out's folder")
    sys.stdout.write(table(report) + f"\nJSON report: {out}\n")
    if args.mode == "production-check" and not advice.compile:
        return EX_RULE_FAILED
    return 0


def _spec(
    model: str,
    runtime: str,
    device: str,
    forecast: ForecastSettings,
    weights: Weights,
    work: Workload,
) -> WorkerSpec:
    return WorkerSpec(
        model,
        runtime,
        device,
        forecast.model_dump(mode="json", exclude={"hf_token"}),
        str(weights.model),
        None if weights.tokenizer is None else str(weights.tokenizer),
        {"ticks": [[asdict(p) for p in t] for t in work.ticks], "timeframe": work.timeframe,
         "data": work.data},
    )  # fmt: skip


def _compile_mode(model: str, forecast: ForecastSettings) -> str:
    modes = {"toto": forecast.toto.compile_mode, "toto2": forecast.toto2.compile_mode}
    return modes.get(model, forecast.kronos.compile_mode) or "default"


def _describe(work: Workload, model: str, forecast: ForecastSettings) -> dict[str, Any]:
    parts = [p for tick in work.ticks for p in tick]
    samples = {"toto": forecast.toto.num_samples, "toto2": None}.get(
        model, forecast.kronos.sample_count
    )
    return {
        "ticks_after_warmup": len(work.ticks) - 1,
        "symbols_per_tick": sorted({len(tick) for tick in work.ticks}),
        "symbols": list(SYMBOLS),
        "contexts": sorted({p.context for p in parts}),
        "horizons": sorted({p.horizon for p in parts}),
        "samples": samples,
        "data": work.data or "random walks",
    }


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in run.items() if k != "outputs"}


def _cells(report: dict[str, Any], label: str, key: str, fmt: str) -> str:
    values = [report[runtime][key] for runtime in ("eager", "compile")]
    return f"{label:<34}" + "".join(f"{format(v, fmt):>14}" for v in values)


def _counts(report: dict[str, Any], label: str, key: str) -> str:
    value = report["compile"]["after_warmup"][key]
    warm = report["compile"]["warmup"][key]
    return f"{label:<34}{'-':>14}{value:>14}   (warm-up: {warm})"


def table(report: dict[str, Any]) -> str:
    device = report["device"]
    work = report["workload"]
    cpu = device["device"] == "cpu"
    lines = [
        f"trader bench compile ({report['mode']}): {report['model']} on {device['device']} "
        f"({device['name']}), torch {device['torch']}, CUDA build {device['cuda'] or 'none'}, "
        f"{device['precision']}, compile mode {report['compile_mode']}",
        f"weights: {report['weights']}",
        f"workload: 1 warm-up tick + {work['ticks_after_warmup']} ticks; "
        f"{'/'.join(map(str, work['symbols_per_tick']))} symbols a tick; contexts "
        f"{min(work['contexts'])}-{max(work['contexts'])} bars; horizons "
        f"{', '.join(map(str, work['horizons']))}; {work['samples']} samples; {work['data']}",
        "",
        f"{'':<34}{'eager':>14}{'compile':>14}",
        _cells(report, "first tick (warm-up), s", "first_call_s", ".2f"),
        _cells(report, "torch compile time, s", "compile_s", ".2f")
        + f"   (inductor cache: {report['compile'].get('inductor_cache_hits', 0)} hits, "
        f"{report['compile'].get('inductor_cache_misses', 0)} misses)",
        _cells(report, "p50 tick after warm-up, ms", "p50_ms", ".1f"),
        _cells(report, "p99 tick after warm-up, ms", "p99_ms", ".1f"),
        _counts(report, "recompiles after warm-up", "recompiles"),
        _counts(report, "graph breaks after warm-up", "graph_breaks"),
        _counts(report, "CUDA-graph skips after warm-up", "cudagraph_skips")
        + ("  (the CPU has no CUDA graphs)" if cpu else ""),
        _cells(report, f"{report['eager']['memory_kind']}, MiB", "peak_memory_mb", ".0f"),
        _cells(report, "running at the end", "mode_at_end", "s"),
        f"{'speedup p50 / p99':<34}{'':>14}"
        f"{report['speedup_p50']:>9.2f}x / {report['speedup_p99']:.2f}x",
        f"{'output agreement':<34}{'':>14}{report['agreement_max_relative_difference']:>14.1e}"
        "   (largest quantile difference, relative)",
        "",
        f"recommendation: {report['advice']}",
        f"rule: {report['rule']}",
    ]
    for kind, reasons in report["compile"]["reasons"].items():
        if reasons:
            lines.append(f"torch's latest {kind.replace('_', ' ')} reason: {reasons[-1][:200]}")
    return "\n".join(lines) + "\n"
