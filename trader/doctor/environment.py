"""The machine and the software stack, as text for `env_info.txt`. Environment variables are
read from an allow-list (device, torch and thread settings): nothing else, so no secret can
reach the evidence folder from there."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from pathlib import Path

import torch

from trader import __version__
from trader.config.forecast_settings import ForecastSettings
from trader.forecast.device import cpu_name

_VARIABLES = (
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "CUDA_MODULE_LOADING",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LD_LIBRARY_PATH",
    "PYTORCH_CUDA_ALLOC_CONF", "TORCH_CUDA_ARCH_LIST", "TORCH_LOGS", "TORCHDYNAMO_DISABLE",
    "TOTO_DISABLE_COMPILE", "ADD_LATEST", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "TRADER_FORECAST__DEVICE", "TRADER_FORECAST__PRECISION", "TRADER_FORECAST__MODEL",
)  # fmt: skip
_PREFIXES = ("TORCHINDUCTOR_",)
_PACKAGES = ("torch", "triton", "numpy", "safetensors", "huggingface_hub", "pydantic", "ccxt")


def _os_release() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return platform.platform()


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB"
    except (OSError, ValueError):
        pass
    return "unknown"


def _packages() -> list[str]:
    names = set(_PACKAGES)
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith("nvidia-"):
            names.add(name)
    lines = []
    for name in sorted(names, key=str.lower):
        try:
            lines.append(f"  {name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            lines.append(f"  {name} (not installed)")
    return lines


def _variables() -> list[str]:
    names = sorted(
        n for n in os.environ if n in _VARIABLES or any(n.startswith(p) for p in _PREFIXES)
    )
    return [f"  {n}={os.environ[n]}" for n in names] or ["  (none set)"]


def _cudnn() -> str:
    try:
        version: int | None = torch.backends.cudnn.version()  # type: ignore[no-untyped-call]
    except Exception as error:  # an unloadable cuDNN is itself a finding
        return f"unavailable ({error})"
    return str(version) if version else "none"


def environment_text(settings: ForecastSettings) -> str:
    lines = [
        f"trader {__version__}",
        f"python {sys.version.split()[0]} ({sys.executable})",
        f"os {_os_release()}; kernel {platform.release()}; {platform.machine()}",
        f"cpu {cpu_name()}; {os.cpu_count()} logical cores; torch threads "
        f"{torch.get_num_threads()}; memory {_memory()}",
        "",
        f"torch {torch.__version__} (git {torch.version.git_version})",
        f"  CUDA build: {torch.version.cuda or 'none (CPU-only build)'}",
        f"  ROCm build: {getattr(torch.version, 'hip', None) or 'none'}",
        f"  cuDNN: {_cudnn()}",
        "",
        "forecast settings:",
        f"  model={settings.model} device={settings.device} precision={settings.precision}",
        f"  toto.runtime={settings.toto.runtime} toto.compile_mode={settings.toto.compile_mode} "
        f"toto.max_recompiles={settings.toto.max_recompiles} kronos.runtime="
        f"{settings.kronos.runtime}",
        "",
        "packages:",
        *_packages(),
        "",
        "environment (device, torch and thread settings only):",
        *_variables(),
        "",
        "torch build configuration:",
        torch.__config__.show().rstrip(),
        "",
        torch.__config__.parallel_info().rstrip(),
    ]
    return "\n".join(lines) + "\n"
