"""What the NVIDIA driver reports, through `nvidia-smi`: it sees the GPUs whatever torch build
is installed, so it can name the card a CPU-only or too-old torch cannot use."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

TIMEOUT_S = 15.0
_QUERY = "index,name,compute_cap,driver_version,memory.total"


@dataclass(frozen=True)
class DriverGpu:
    index: int
    name: str
    capability: tuple[int, int] | None  # None where the driver is too old to report it
    driver: str
    memory: str


def run_nvidia_smi(*args: str) -> str | None:
    """The tool's output, or None where it is not installed or fails (the text says why)."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        return None
    try:
        done = subprocess.run(  # noqa: S603 - a fixed tool and fixed arguments
            [tool, *args], capture_output=True, text=True, timeout=TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"nvidia-smi {' '.join(args)} failed: {error}"
    if done.returncode:
        return f"nvidia-smi {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
    return done.stdout


def driver_gpus() -> list[DriverGpu]:
    """The GPUs the driver sees; empty where there is no driver or tool."""
    text = run_nvidia_smi(f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits")
    return parse_gpu_query(text or "")


def parse_gpu_query(text: str) -> list[DriverGpu]:
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 5 or not fields[0].isdigit():
            continue  # an error line, not a GPU
        index, name, cap, driver, memory = fields
        major, _, minor = cap.partition(".")
        capability = (int(major), int(minor)) if major.isdigit() and minor.isdigit() else None
        gpus.append(DriverGpu(int(index), name, capability, driver, f"{memory} MiB"))
    return gpus
