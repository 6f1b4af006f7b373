"""Training checkpoints: written whole or not at all (to a temporary file beside the target,
flushed to the disk, then renamed over it), so a crash, a SIGKILL or a full disk mid-write
leaves the previous checkpoint as it was.

A checkpoint holds everything a resumed run needs to continue exactly where it stopped: the
weights being trained (adapters included), the optimizer and scheduler, the step and the
early-stopping record, the random generators' states and the split it was trained on.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

FORMAT = 1
LAST = "last.pt"
BEST = "best.pt"


class CheckpointFailed(Exception):
    """A checkpoint could not be written; the one before it is intact."""


def _open(path: Path) -> IO[bytes]:
    return open(path, "wb")


# How checkpoint files are opened for writing (a test swaps in a disk that fills up).
opener: Callable[[Path], IO[bytes]] = _open


def save_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` to `path` whole or not at all; OSError (the temporary file removed,
    `path` untouched) when it cannot be written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with opener(temporary) as handle:
            torch.save(payload, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        temporary.unlink(missing_ok=True)
        cause = _os_error(error)
        if cause is not None and cause is not error:
            # torch.save reports a failed write as a RuntimeError of its zip writer.
            raise cause from error
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a power cut
    finally:
        os.close(directory)


def _os_error(error: BaseException | None) -> OSError | None:
    """The OSError (ENOSPC, EIO...) behind `error`, if one is."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, OSError):
            return error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def load(path: Path, device: torch.device) -> dict[str, Any]:
    payload: dict[str, Any] = torch.load(path, map_location=device, weights_only=False)
    if payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not a trader finetune checkpoint of format {FORMAT}")
    return payload


def rng_state(device: torch.device) -> dict[str, Any]:
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"].cpu())
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)
