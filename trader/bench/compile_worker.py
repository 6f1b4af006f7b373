"""One runtime (eager or compiled) of one model over a workload, in this fresh process (its
peak memory is its own, and no compiled code is shared).

    python -m trader.bench.compile_worker SPEC_JSON

In step with the other runtime's worker, so that both meet the same machine (a shared CPU's
load changes by the minute): it says `ready` once loaded, runs tick N when it reads `N`,
answering `done`, and prints its JSON report when it reads `report`.
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

import torch
from torch._dynamo.utils import compilation_time_metrics, counters

from trader.bench.workload import Part, Series, Workload
from trader.config.forecast_settings import ForecastSettings
from trader.forecast.device import choose_device
from trader.forecast.device_choice import DeviceChoice
from trader.forecast.kronos import KronosForecaster
from trader.forecast.kronos.loading import load_model, load_tokenizer
from trader.forecast.kronos.sampling import Sampling
from trader.forecast.runtime import CUDAGRAPH_SKIP, GRAPH_BREAK, LIMIT_HIT, RECOMPILE, ModelRuntime
from trader.forecast.toto import TotoForecaster, load_toto_forecaster
from trader.forecast.toto2 import Toto2Forecaster, load_toto2_forecaster

# The bench measures what compiling does: the guard must not switch it off halfway (torch's
# own recompile limit still does, and is reported).
NO_GUARD = 10**9
# Marks the protocol's lines on stdout, where a library might print too.
PREFIX = "@trader-bench "


@dataclass(frozen=True)
class WorkerSpec:
    model: str
    runtime: str  # eager or compile
    device: str
    settings: dict[str, Any]  # ForecastSettings, JSON (no secrets: hf_token left out)
    weights: str
    tokenizer: str | None
    work: dict[str, Any]  # Workload

    def workload(self) -> Workload:
        ticks = tuple(tuple(Part(**p) for p in tick) for tick in self.work["ticks"])
        return Workload(ticks, self.work["timeframe"], self.work["data"])


def _forecaster(
    spec: WorkerSpec, settings: ForecastSettings, device: DeviceChoice
) -> TotoForecaster | Toto2Forecaster | KronosForecaster:
    compiled = spec.runtime == "compile"
    if spec.model == "toto2":
        toto2 = settings.toto2.model_copy(
            update={"runtime": spec.runtime, "max_recompiles": NO_GUARD}
        )
        return load_toto2_forecaster(spec.weights, settings=toto2, device=device)
    if spec.model == "toto":
        toto = settings.toto.model_copy(
            update={"runtime": spec.runtime, "max_recompiles": NO_GUARD}
        )
        return load_toto_forecaster(spec.weights, settings=toto, seed=settings.seed, device=device)
    kronos = settings.kronos
    mode = kronos.compile_mode
    runtime = ModelRuntime(
        "kronos",
        compiled=compiled,
        compiler=lambda fn: torch.compile(fn, mode=mode, dynamic=True),
        max_recompiles=NO_GUARD,
    )
    assert spec.tokenizer is not None
    return KronosForecaster(
        load_model(Path(spec.weights)),
        load_tokenizer(Path(spec.tokenizer)),
        max_context=kronos.max_context,
        sample_count=kronos.sample_count,
        sampling=Sampling(kronos.temperature, kronos.top_k, kronos.top_p),
        seed=settings.seed,
        device=device.device,
        runtime=runtime,
    )


def _compile_seconds() -> float:
    """torch's own total of compile time in this process (dynamo through inductor)."""
    return float(sum(compilation_time_metrics.get("_compile.compile_inner", [])))


def _peak_memory_mb(device: torch.device) -> tuple[float, str]:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "peak GPU memory allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "peak process RSS"


def _step(control: TextIO, answer: TextIO, said: str) -> str:
    answer.write(f"{PREFIX}{said}\n")
    answer.flush()
    return control.readline().strip()


def run(spec: WorkerSpec, control: TextIO, answer: TextIO) -> dict[str, Any]:
    settings = ForecastSettings.model_validate(spec.settings)
    work = spec.workload()
    series = Series(work)
    choice = choose_device(spec.device, settings.precision)
    device = choice.device
    forecaster = _forecaster(spec, settings, choice)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    levels = settings.quantiles
    outputs: list[list[float]] = []
    latencies: list[float] = []
    command = _step(control, answer, "ready")
    began = time.perf_counter()
    while command.isdigit():
        tick = int(command)
        requests = series.requests(tick, levels)
        start = time.perf_counter()
        forecasts = forecaster.forecast(requests)  # values come back on the CPU: synchronised
        seconds = time.perf_counter() - start
        if tick == 0:
            first_call = seconds
            compile_after_warmup = _compile_seconds()
        else:
            latencies.append(seconds * 1000)
        outputs.append(
            [
                v
                for f in forecasts
                for field in sorted(f.quantiles)
                for level in sorted(f.quantiles[field])
                for v in f.quantiles[field][level]
            ]
        )
        command = _step(control, answer, "done")
    if command != "report":
        raise SystemExit(f"compile worker: unexpected command {command!r}")
    runtime = forecaster.runtime
    peak, memory_kind = _peak_memory_mb(device)
    ordered = sorted(latencies)
    return {
        "runtime": spec.runtime,
        "mode_at_end": forecaster.mode,
        "device": str(device),
        "first_call_s": first_call,
        "compile_s": _compile_seconds(),
        "compile_after_warmup_s": _compile_seconds() - compile_after_warmup,
        # Inductor's on-disk cache makes a second run's compile far shorter: say which it was.
        "inductor_cache_hits": counters["inductor"]["fxgraph_cache_hit"],
        "inductor_cache_misses": counters["inductor"]["fxgraph_cache_miss"],
        "total_s": time.perf_counter() - began,
        "latency_ms": latencies,
        "p50_ms": statistics.median(ordered),
        "p99_ms": ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))],
        "after_warmup": asdict(forecaster.compile_stats),
        "warmup": asdict(runtime.warmup_stats),
        "reasons": {
            kind: runtime.reasons(kind)[-5:]
            for kind in (RECOMPILE, GRAPH_BREAK, CUDAGRAPH_SKIP, LIMIT_HIT)
        },
        "peak_memory_mb": peak,
        "memory_kind": memory_kind,
        "outputs": outputs,
    }


def main() -> int:
    spec = WorkerSpec(**json.loads(sys.argv[1]))
    report = run(spec, sys.stdin, sys.stdout)
    sys.stdout.write(f"{PREFIX}{json.dumps(report)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
