"""Published checkpoints: `config.json` + `model.safetensors` in a local directory, the Hugging
Face cache, or (when allowed) the hub. Every tensor is checked by name and shape: a missing,
extra or misshapen one is an error that names it."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

FILES = ("config.json", "model.safetensors")


class WeightsUnavailable(Exception):
    """No weights where we looked; the message names the model, the places and the fix."""


class CheckpointMismatch(Exception):
    """The checkpoint's tensors are not the architecture's; the message names them."""


@dataclass(frozen=True)
class Checkpoint:
    config: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    directory: Path


def holds_checkpoint(directory: Path | None) -> bool:
    """Whether `directory` itself is a checkpoint folder (config.json + model.safetensors)."""
    return directory is not None and all((directory / name).is_file() for name in FILES)


def kronos_pair(directory: Path | None) -> tuple[Path, Path] | None:
    """The predictor and tokenizer folders of a Kronos pair laid out as `trader finetune`
    writes it (`predictor/` and `tokenizer/`, each a checkpoint folder), else None."""
    if directory is None:
        return None
    predictor, tokenizer = directory / "predictor", directory / "tokenizer"
    if holds_checkpoint(predictor) and holds_checkpoint(tokenizer):
        return predictor, tokenizer
    return None


def locate(
    repo: str,
    *,
    weights_dir: Path | None = None,
    token: str | None = None,
    allow_download: bool = False,
) -> Path:
    """The directory holding `repo`'s checkpoint: `repo` itself if it is a directory, else
    `weights_dir/<repo>` or `weights_dir/<name>`, else the Hugging Face cache, else (only
    with `allow_download`) a download from the hub."""
    looked: list[str] = []
    candidates = [Path(repo)]
    if weights_dir is not None:
        candidates += [weights_dir / repo, weights_dir / repo.rsplit("/", 1)[-1]]
    for candidate in candidates:
        if holds_checkpoint(candidate):
            return candidate
        looked.append(str(candidate))
    from huggingface_hub import snapshot_download  # noqa: PLC0415 - only when needed
    from huggingface_hub.errors import LocalEntryNotFoundError  # noqa: PLC0415

    try:
        return Path(snapshot_download(repo, allow_patterns=list(FILES), local_files_only=True))
    except (LocalEntryNotFoundError, OSError, ValueError):
        looked.append("the Hugging Face cache")
    if allow_download:
        try:
            return Path(snapshot_download(repo, allow_patterns=list(FILES), token=token))
        except Exception as error:  # any failure means: not available
            looked.append(f"the Hugging Face hub ({type(error).__name__})")
    raise WeightsUnavailable(
        f"no weights for {repo}: looked in {', '.join(looked)}. Download them with "
        f"`huggingface-cli download {repo} {' '.join(FILES)}`, or set forecast.weights_dir "
        "to a directory holding config.json and model.safetensors"
    )


def load_checkpoint(directory: Path) -> Checkpoint:
    try:
        config = json.loads((directory / "config.json").read_text())
        tensors = load_file(directory / "model.safetensors", device="cpu")
    except (OSError, ValueError, SafetensorError) as error:  # a damaged or cut-short file
        raise WeightsUnavailable(f"{directory}: cannot read the checkpoint: {error}") from error
    return Checkpoint(config, tensors, directory)


def check_tensors(
    expected: Mapping[str, torch.Size], found: Mapping[str, torch.Tensor], source: str
) -> None:
    """Refuse a checkpoint whose tensors are not exactly the expected ones."""
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    misshapen = sorted(
        f"{name} {tuple(found[name].shape)} (expected {tuple(expected[name])})"
        for name in set(expected) & set(found)
        if found[name].shape != expected[name]
    )
    problems = []
    for label, names in (("missing", missing), ("unexpected", extra), ("misshapen", misshapen)):
        if names:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            problems.append(f"{label}: {shown}")
    if problems:
        raise CheckpointMismatch(f"{source}: " + "; ".join(problems))


def check_state(
    state: Mapping[str, torch.Tensor],
    found: Mapping[str, torch.Tensor],
    source: str,
    unread: Mapping[str, torch.Size] | None = None,
) -> dict[str, torch.Tensor]:
    """The tensors of `found` that load into a module whose state is `state`: exactly its
    names and shapes (plus `unread`, published tensors inference never reads, checked by
    shape and dropped), floating where the module's are, and finite."""
    check_tensors({name: t.shape for name, t in state.items()} | dict(unread or {}), found, source)
    wrong_kind = sorted(
        f"{name} ({found[name].dtype})"
        for name, t in state.items()
        if found[name].is_floating_point() != t.is_floating_point()
    )
    if wrong_kind:
        raise CheckpointMismatch(f"{source}: wrong dtype: {', '.join(wrong_kind)}")
    not_finite = sorted(
        name
        for name in state
        if found[name].is_floating_point() and not bool(torch.isfinite(found[name]).all())
    )
    if not_finite:
        raise CheckpointMismatch(f"{source}: non-finite values in {', '.join(not_finite)}")
    return {name: found[name] for name in state}
