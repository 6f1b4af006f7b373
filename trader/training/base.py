"""Where a fine-tuning run starts: a published checkpoint folder (`--base DIR`, what
`forecast.weights_dir` takes), the configured model's weights (the default), or random
weights of a small configuration of the same architecture (`--base random:small`, for tests
and demos), labelled as such wherever the run reports."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trader.config.forecast_settings import ForecastSettings
from trader.forecast.random_weights import write_random_kronos, write_random_toto
from trader.forecast.weights import WeightsUnavailable, holds_checkpoint, kronos_pair, locate

RANDOM_SMALL = "random:small"


@dataclass(frozen=True)
class Base:
    model: str  # toto or kronos
    path: Path  # Toto's checkpoint folder; Kronos's predictor folder
    tokenizer: Path | None  # Kronos's tokenizer folder
    label: str
    random: bool

    def describe(self) -> dict[str, str | bool | None]:
        return {
            "path": str(self.path),
            "tokenizer": None if self.tokenizer is None else str(self.tokenizer),
            "label": self.label,
            "random": self.random,
        }


def resolve_base(
    model: str, base: str | None, settings: ForecastSettings, scratch: Path, seed: int
) -> Base:
    """WeightsUnavailable (the message says what was looked for) when there is no base."""
    if base == RANDOM_SMALL:
        return _random(model, scratch, seed)
    if base is not None:
        return _folder(model, Path(base))
    token = settings.hf_token.get_secret_value() if settings.hf_token else None

    def find(repo: str) -> Path:
        return locate(
            repo, weights_dir=settings.weights_dir, token=token, allow_download=settings.download
        )

    if model == "toto":
        path = find(settings.toto.repo)
        return Base(model, path, None, f"{settings.toto.repo} from {path}", random=False)
    pair = kronos_pair(settings.weights_dir)
    if pair is not None:
        return Base(model, *pair, f"Kronos from {settings.weights_dir}", random=False)
    path, tokenizer = find(settings.kronos.repo), find(settings.kronos.tokenizer_repo)
    label = f"{settings.kronos.repo} from {path} with {settings.kronos.tokenizer_repo}"
    return Base(model, path, tokenizer, label, random=False)


def _folder(model: str, folder: Path) -> Base:
    if model == "toto" and holds_checkpoint(folder):
        return Base(model, folder, None, f"weights from {folder}", random=False)
    pair = kronos_pair(folder)
    if model == "kronos" and pair is not None:
        return Base(model, *pair, f"weights from {folder}", random=False)
    layout = (
        "config.json and model.safetensors"
        if model == "toto"
        else "predictor/ and tokenizer/, each with config.json and model.safetensors"
    )
    raise WeightsUnavailable(
        f"--base {folder}: not a {model} checkpoint folder (it needs {layout}); give a "
        f"published checkpoint folder, another run's weights/ folder, or {RANDOM_SMALL}"
    )


def _random(model: str, scratch: Path, seed: int) -> Base:
    """Written once into the run's folder (rank 0 first, then read by the other processes
    and by a resumed run)."""
    directory = scratch / "base"
    label = (
        f"RANDOM weights of a small {model} architecture (--base {RANDOM_SMALL}, seed "
        f"{seed}): a demonstration start, not a published model"
    )
    if model == "toto":
        if not holds_checkpoint(directory):
            write_random_toto(directory, "small", seed)
        return Base(model, directory, None, label, random=True)
    if kronos_pair(directory) is None:
        write_random_kronos(directory, "small", seed)
    return Base(model, directory / "predictor", directory / "tokenizer", label, random=True)
