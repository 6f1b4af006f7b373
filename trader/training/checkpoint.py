"""Training checkpoints: written whole or not at all (to a temporary file beside the target,
flushed to the disk, then renamed over it), so a crash, a SIGKILL or a full disk mid-write
leaves the previous checkpoint as it was; private (0600 in a 0700 folder), never written
through a link, and read with torch's weights-only unpickler, so a planted file cannot run code.

A checkpoint holds everything a resumed run needs to continue exactly where it stopped: the
weights being trained (adapters included), the optimizer and scheduler, the step and the
early-stopping record, the random generators' states and the split it was trained on.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch

from trader.private_files import UnsafePath, create_private, replacing

FORMAT = 2  # 2: the random generators' states as tensors and plain values (format 1 pickled
# numpy's), so a checkpoint loads with torch.load(weights_only=True)
LAST = "last.pt"
BEST = "best.pt"


class CheckpointFailed(Exception):
    """A checkpoint could not be written; the one before it is intact."""


class CheckpointRefused(Exception):
    """A checkpoint that is not read: it holds objects other than tensors and plain values
    (loading them could run code), or it is not a trader checkpoint of this format."""


# How checkpoint files are opened for writing: 0600, created exclusively, never through a
# link (a test swaps in a disk that fills up).
opener: Callable[[Path], IO[bytes]] = create_private


def save_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write `payload` to `path` whole or not at all, in a private folder (0700, this user's);
    OSError (the temporary file removed, `path` untouched) when it cannot be written,
    UnsafePath for a link planted at `path` or in place of its folder."""
    try:
        with replacing(path, what="the checkpoints folder", opener=opener) as handle:
            torch.save(payload, handle)
    except UnsafePath:
        raise
    except BaseException as error:
        cause = _os_error(error)
        if cause is not None and cause is not error:
            # torch.save reports a failed write as a RuntimeError of its zip writer.
            raise cause from error
        raise


def _os_error(error: BaseException | None) -> OSError | None:
    """The OSError (ENOSPC, EIO...) behind `error`, if one is."""
    seen = 0
    while error is not None and seen < 8:
        if isinstance(error, OSError):
            return error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def load(path: Path, device: torch.device) -> dict[str, Any]:
    """The checkpoint at `path`, read with torch's weights-only unpickler: tensors, numbers,
    strings and containers of them, never an object whose unpickling runs code.
    CheckpointRefused for anything else."""
    try:
        payload = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointRefused(
            f"{path} holds objects other than tensors and plain values ("
            f"{str(error).splitlines()[0][:200]}): refused, loading it could run code; it was "
            "not written by this version of trader finetune: choose another --out"
        ) from None
    # Truncated, flipped or not a torch file: its reader and unpickler fail on damaged bytes
    # with anything (OSError, KeyError, IndexError, AssertionError found by a fuzzer).
    except Exception as error:
        raise CheckpointRefused(f"{path} cannot be read as a checkpoint: {error}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointRefused(f"{path}: not a trader finetune checkpoint of format {FORMAT}")
    return payload


def rng_state(device: torch.device) -> dict[str, Any]:
    kind, keys, *rest = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        # Its keys as a tensor: numpy's arrays are not among what weights-only loading reads.
        "numpy": [kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), *rest],
        "python": random.getstate(),
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    torch.set_rng_state(state["torch"].cpu())
    kind, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss))
    random.setstate(state["python"])
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)
