"""`trader doctor [--device D] [--evidence DIR]`: the checks, the report, the evidence folder."""

from __future__ import annotations

import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from trader import __version__
from trader.config.schema import Settings
from trader.doctor.devices import DeviceFindings, device_text, examine_devices
from trader.doctor.environment import environment_text
from trader.doctor.inference import InferenceOptions, InferenceSmoke, run_inference_smoke
from trader.doctor.verdict import Verdict, verdict
from trader.exit_codes import EX_UNAVAILABLE, EX_USAGE
from trader.forecast.nvidia import run_nvidia_smi
from trader.private_files import private_folder, write_private

_DEVICE = re.compile(r"auto|cpu|cuda(:[0-9]+)?")
_MASK = "**********"


@dataclass(frozen=True)
class DoctorOptions:
    device: str | None = None  # default: forecast.device
    evidence: Path | None = None
    model: str | None = None  # default: forecast.model (toto for the baseline)
    weights: Path | None = None
    tokenizer: Path | None = None
    size: str = "published"
    data: Path | None = None
    inference: bool = True


def run_doctor(settings: Settings, options: DoctorOptions, secrets: Sequence[str] = ()) -> int:
    requested = options.device or settings.forecast.device
    if not _DEVICE.fullmatch(requested):
        sys.stderr.write(
            f"trader doctor: --device {requested!r} is not auto, cpu, cuda or cuda:N\n"
        )
        return EX_USAGE
    findings = examine_devices(requested, settings.forecast.precision)
    inference = None
    if findings.choice is not None and options.inference:
        model = options.model or settings.forecast.model
        model = "toto" if model == "baseline" else model
        with tempfile.TemporaryDirectory(prefix="trader-doctor-") as scratch:
            inference = run_inference_smoke(
                settings,
                findings.choice,
                InferenceOptions(
                    model, options.weights, options.tokenizer, options.size, options.data
                ),
                Path(scratch),
            )
    result = verdict(findings, inference)
    devices = device_text(findings)
    sys.stdout.write(_report(findings, inference, result, devices))
    if options.evidence is not None:
        files = _evidence(settings, requested, findings, inference, result, devices)
        written = _write(options.evidence, files, secrets)
        sys.stdout.write(f"\nevidence written to {written}/ ({', '.join(sorted(files))})\n")
    return result.exit_code


def _report(
    findings: DeviceFindings, inference: InferenceSmoke | None, result: Verdict, devices: str
) -> str:
    parts = [
        f"trader doctor: forecast.device = {findings.requested}",
        "",
        devices.rstrip(),
        "",
        "inference smoke:",
    ]
    if inference is None:
        skipped = "no device to run on" if findings.choice is None else "skipped (--no-inference)"
        parts.append(f"  {skipped}")
    else:
        parts += [f"  {line}" for line in inference.lines]
    parts += ["", result.line]
    if result.exit_code == EX_UNAVAILABLE:
        parts.append("the daemon refuses to start with this setting (it never falls back)")
    return "\n".join(parts) + "\n"


def _evidence(
    settings: Settings,
    requested: str,
    findings: DeviceFindings,
    inference: InferenceSmoke | None,
    result: Verdict,
    devices: str,
) -> dict[str, str]:
    files = {
        "env_info.txt": environment_text(settings.forecast),
        "torch_cuda_check.txt": devices,
    }
    smi = run_nvidia_smi()
    if smi is not None:
        details = run_nvidia_smi("-q") or ""
        files["nvidia_smi.txt"] = f"$ nvidia-smi\n{smi}\n$ nvidia-smi -q\n{details}"
    if inference is not None:
        files["inference_smoke.txt"] = "\n".join(inference.lines) + "\n"
    files["README.md"] = _readme(requested, findings, inference, result, sorted(files))
    return files


_DESCRIPTIONS = {
    "env_info.txt": "trader, Python, OS, CPU, memory, torch build and configuration, packages, "
    "device-related environment variables (an allow-list)",
    "torch_cuda_check.txt": "what torch sees; per GPU the compute capability, the kernel check "
    "against the build's arch list and the smoke test; the CPU's smoke test; the decision",
    "nvidia_smi.txt": "`nvidia-smi` and `nvidia-smi -q` as the driver reports them",
    "inference_smoke.txt": "a short forecast on the chosen device: weights, timings, memory",
}


def _readme(
    requested: str,
    findings: DeviceFindings,
    inference: InferenceSmoke | None,
    result: Verdict,
    names: list[str],
) -> str:
    choice = findings.choice
    env = findings.environment
    gpus = ", ".join(
        f"cuda:{v.gpu.index} {v.gpu.name} ({'unusable' if v.problem(env.torch) else 'usable'})"
        for v in findings.gpus
    )
    driver = ", ".join(g.name for g in env.driver)
    rows = [
        ("device asked for", requested),
        ("decision", f"{choice.device} ({choice.precision})" if choice else "refused"),
        ("why", choice.reason if choice else findings.error or ""),
        ("fallback", (choice.fallback if choice else None) or "none"),
        ("GPUs torch sees", gpus or "none"),
        ("GPUs the driver sees", driver or ("none" if not env.gpus else "(not asked)")),
        ("build", env.build),
        ("CPU smoke test", "passed" if findings.cpu_smoke.ok else str(findings.cpu_smoke.failure)),
        ("inference", inference.summary if inference else "not run"),
    ]
    missing = "" if "nvidia_smi.txt" in names else "\n(`nvidia-smi` is not installed here.)\n"
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    table = "\n".join(f"| {k} | {_cell(v)} |" for k, v in rows)
    listing = "\n".join(f"- `{n}`: {_DESCRIPTIONS[n]}" for n in names if n in _DESCRIPTIONS)
    return (
        f"# trader doctor evidence\n\nWritten {stamp} by trader {__version__} "
        f"(`trader doctor --device {requested}`).\n\n"
        f"**{result.status}** (exit {result.exit_code}): {result.summary}\n\n"
        f"| check | result |\n|---|---|\n{table}\n\n## Files\n\n{listing}\n{missing}\n"
        "Attach this folder to a bug report. It holds no secrets: environment variables come "
        "from an allow-list and configured secrets are masked.\n"
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _write(folder: Path, files: dict[str, str], secrets: Sequence[str]) -> Path:
    """The evidence, for its user's eyes until they attach it: a folder made 0700, files 0600."""
    private_folder(folder)
    masked = sorted((s for s in secrets if s), key=len, reverse=True)
    for name, text in files.items():
        safe = text
        for secret in masked:
            safe = safe.replace(secret, _MASK)
        write_private(folder / name, safe)
    return folder
