"""The evidence folder of a run, written by rank 0 as it goes (so a killed run leaves what it
reached): `training_log.txt` (the start lines, then a line per logging step and validation),
`metrics.jsonl` (the same as JSON), `env_info.txt` and `torch_cuda_check.txt` (as `trader
doctor` writes them), `nvidia_smi.txt` (taken while training, where the tool exists),
`config.json` (every setting used) and, at the end, `loss.png` and a `README.md` summary."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trader.config.forecast_settings import ForecastSettings
from trader.doctor.devices import DeviceFindings, device_text
from trader.doctor.environment import environment_text
from trader.forecast.nvidia import run_nvidia_smi
from trader.private_files import append_private, owned_folder, write_file

DESCRIPTIONS = {
    "training_log.txt": "the device line and the split, then a line per logging step (step, "
    "loss, learning rate, windows/s, device, peak GPU memory on CUDA) and per validation",
    "metrics.jsonl": "the same records as JSON lines",
    "env_info.txt": "trader, Python, OS, CPU, memory, torch build, packages, device-related "
    "environment variables (an allow-list), as `trader doctor` writes it",
    "torch_cuda_check.txt": "what torch sees, each GPU's kernel check and smoke test, the "
    "device decision, as `trader doctor` writes it",
    "nvidia_smi.txt": "`nvidia-smi` and `nvidia-smi -q`, taken while training",
    "config.json": "every setting the run used",
    "loss.png": "training and validation loss by step",
    "README.md": "this summary",
}


class Evidence:
    def __init__(self, folder: Path) -> None:
        self.folder = owned_folder(folder, "the evidence folder")
        self._gpu_snapshot: threading.Thread | None = None

    def start(
        self,
        forecast: ForecastSettings,
        findings: DeviceFindings,
        config: dict[str, Any],
        lines: Sequence[str],
    ) -> None:
        write_file(self.folder / "env_info.txt", environment_text(forecast))
        write_file(self.folder / "torch_cuda_check.txt", device_text(findings))
        write_file(self.folder / "config.json", json.dumps(config, indent=2, default=str) + "\n")
        for line in lines:
            self.line(line)

    def line(self, text: str) -> None:
        append_private(self.folder / "training_log.txt", text + "\n")

    def record(self, record: dict[str, Any]) -> None:
        append_private(self.folder / "metrics.jsonl", json.dumps(record) + "\n")

    def snapshot_gpu(self) -> None:
        """`nvidia-smi` in the background, once, while the GPU is busy training."""
        if self._gpu_snapshot is not None:
            return

        def take() -> None:
            summary = run_nvidia_smi()
            if summary is None:  # no tool here: nothing to write
                return
            details = run_nvidia_smi("-q") or ""
            text = f"$ nvidia-smi (during training)\n{summary}\n$ nvidia-smi -q\n{details}"
            write_file(self.folder / "nvidia_smi.txt", text)

        self._gpu_snapshot = threading.Thread(target=take, name="nvidia-smi", daemon=True)
        self._gpu_snapshot.start()

    def records(self) -> list[dict[str, Any]]:
        path = self.folder / "metrics.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def finish(self, readme: Callable[[list[str]], str]) -> None:
        """The plot, then the README (`readme` renders it from the folder's file names)."""
        if self._gpu_snapshot is not None:
            self._gpu_snapshot.join()
        plot_losses(self.records(), self.folder / "loss.png")
        names = sorted({*self.files(), "README.md"})
        write_file(self.folder / "README.md", readme(names))

    def files(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir() if p.is_file())


def plot_losses(records: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib  # noqa: PLC0415 - only for the plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    from trader.backtest.plots import save_png  # noqa: PLC0415 - matplotlib

    train = [(r["step"], r["loss"]) for r in records if r.get("kind") == "train"]
    validation = [(r["step"], r["loss"]) for r in records if r.get("kind") == "validation"]
    figure, axes = plt.subplots(figsize=(8, 4.5))
    for points, label, style in ((train, "train", "-"), (validation, "validation", "o-")):
        if points:
            steps, losses = zip(*points, strict=True)
            axes.plot(steps, losses, style, label=label)
    axes.set_xlabel("step")
    axes.set_ylabel("loss")
    axes.set_title("fine-tuning loss")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    save_png(figure, path, dpi=100)
    plt.close(figure)
