"""The reference Toto 2.0 (`toto-2==2.0.0`, Python >= 3.12) run in its own virtualenv
(.venv/toto2-reference, built by the Makefile) through one subprocess.

Imported by the conformance tests and bench/toto2.py for `reference_python` and `run`; run
by the reference's interpreter as a script, it reads one JSON job from stdin:

- `checkpoints`: random weights of a configuration written by the reference's own
  save_pretrained (`{"directory", "config", "seed", "label"}`; a label marks them random);
- `cases`: forecasts by the reference's `Toto2Model.forecast`, loaded by its own
  from_pretrained (`{"key", "checkpoint", "inputs", "horizon", "decode_block", "missing"}`,
  inputs a torch file of target, observed and series ids), all saved to `out`;
- `time`: one case timed (median of repeats after warm-up) and its peak RSS, as JSON.

This file imports nothing of trader's: the reference's interpreter runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RANDOM_MARKER = "trader-random-weights.json"  # trader.forecast.toto2.loading's


def reference_python() -> Path | None:
    """The reference's interpreter: $TRADER_TOTO2_REFERENCE_PYTHON, else the Makefile's."""
    chosen = os.environ.get("TRADER_TOTO2_REFERENCE_PYTHON")
    python = Path(chosen) if chosen else ROOT / ".venv" / "toto2-reference" / "bin" / "python"
    return python if python.is_file() else None


def run(job: dict[str, Any], python: Path, *, threads: int | None = None) -> str:
    """Run one job in a fresh reference process; its stdout."""
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    done = subprocess.run(
        [str(python), __file__],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if done.returncode:
        raise RuntimeError(f"the reference Toto 2.0 failed:\n{done.stderr[-4000:]}")
    return done.stdout


def _write(spec: dict[str, Any]) -> None:
    import torch  # noqa: PLC0415 - the reference's interpreter only
    from toto2 import Toto2Model, Toto2ModelConfig  # noqa: PLC0415

    torch.manual_seed(spec["seed"])
    model = Toto2Model(Toto2ModelConfig(**spec["config"]))
    with torch.no_grad():  # away from init values (zeros, ones) that would hide bugs
        for parameter in model.parameters():
            spread = 0.5 if parameter.dim() > 1 else 0.2
            parameter.copy_(torch.randn_like(parameter) * spread)
    directory = Path(spec["directory"])
    model.save_pretrained(directory)
    if spec.get("label"):
        (directory / RANDOM_MARKER).write_text(json.dumps({"label": spec["label"]}))


def _forecast(model: Any, case: dict[str, Any]) -> Any:
    import torch  # noqa: PLC0415

    device = next(model.parameters()).device
    inputs = {name: t.to(device) for name, t in torch.load(case["inputs"]).items()}
    with torch.inference_mode():
        knots = model.forecast(
            {
                "target": inputs["target"],
                "target_mask": inputs["observed"],
                "series_ids": inputs["series"],
            },
            horizon=case["horizon"],
            decode_block_size=case.get("decode_block"),
            has_missing_values=case.get("missing", True),
        )
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return knots.cpu()


def _load(directory: str) -> Any:
    from toto2 import Toto2Model  # noqa: PLC0415

    return Toto2Model.from_pretrained(directory).eval()


def _time(case: dict[str, Any]) -> dict[str, Any]:
    import resource  # noqa: PLC0415
    import statistics  # noqa: PLC0415
    import time  # noqa: PLC0415

    import torch  # noqa: PLC0415

    torch.set_num_threads(case.get("threads") or torch.get_num_threads())
    model = _load(case["checkpoint"]).to(case.get("device", "cpu"))
    for _ in range(case.get("warmup", 1)):
        _forecast(model, case)
    times = []
    for _ in range(case.get("repeats", 3)):
        began = time.perf_counter()
        knots = _forecast(model, case)
        times.append((time.perf_counter() - began) * 1000)
    if case.get("save"):
        torch.save(knots, case["save"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ms_median": statistics.median(times), "peak_rss_mb": peak}


def main() -> int:
    import warnings  # noqa: PLC0415

    warnings.simplefilter("ignore")  # the reference's imports warn about optional extras
    job = json.loads(sys.stdin.read())
    for spec in job.get("checkpoints", []):
        _write(spec)
    if job.get("cases"):
        import torch  # noqa: PLC0415

        models: dict[str, Any] = {}
        results = {}
        for case in job["cases"]:
            if case["checkpoint"] not in models:
                loaded = _load(case["checkpoint"]).to(case.get("device", "cpu"))
                models[case["checkpoint"]] = loaded
            model = models[case["checkpoint"]]
            results[case["key"]] = _forecast(model, case)
        torch.save(results, job["out"])
    if job.get("time"):
        sys.stdout.write(json.dumps(_time(job["time"])) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
