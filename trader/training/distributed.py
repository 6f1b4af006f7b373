"""Data-parallel training with torch's own machinery: a run started by `torchrun` (one
process per device, on one machine or several through torchrun's rendezvous) joins the
process group torchrun describes in its environment, NCCL on GPUs and gloo on the CPU.

Every process draws the same global batch and takes its own equal share, so the batch and
the learning rate are the configured ones whatever the world size; DDP averages the
gradients. Only rank 0 writes checkpoints, evidence and weights; decisions every process must
take together (stop on a signal, stop early) are reduced across the world first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

TIMEOUT = timedelta(minutes=30)  # evaluation on rank 0 keeps the others waiting that long


@dataclass(frozen=True)
class World:
    rank: int
    local_rank: int
    size: int

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def describe(self) -> dict[str, int]:
        return {"rank": self.rank, "local_rank": self.local_rank, "world_size": self.size}


SINGLE = World(0, 0, 1)


def world_from(environ: Mapping[str, str]) -> World:
    """The process's place as torchrun describes it (RANK, LOCAL_RANK, WORLD_SIZE)."""
    size = int(environ.get("WORLD_SIZE", "1"))
    if size <= 1:
        return SINGLE
    return World(int(environ["RANK"]), int(environ.get("LOCAL_RANK", "0")), size)


def join(world: World, device: torch.device) -> None:
    """Join torchrun's process group: NCCL for CUDA devices, gloo for the CPU."""
    if not world.distributed or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(
        backend,
        rank=world.rank,
        world_size=world.size,
        timeout=TIMEOUT,
        device_id=device if device.type == "cuda" else None,
    )


def leave(world: World) -> None:
    if world.distributed and dist.is_initialized():
        dist.destroy_process_group()


def wrap(module: nn.Module, world: World, device: torch.device) -> nn.Module:
    """DDP around the objective when there are several processes."""
    if not world.distributed:
        return module
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(module, device_ids=ids)


def any_true(flag: bool, world: World, device: torch.device) -> bool:
    """Whether any process's flag is set (the same answer on every process)."""
    if not world.distributed:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item() > 0)


def total(values: list[float], world: World, device: torch.device) -> list[float]:
    """Element-wise sums of `values` over every process."""
    if not world.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return [float(v) for v in tensor.tolist()]


def barrier(world: World) -> None:
    if world.distributed:
        dist.barrier()


def launched_by_torchrun(environ: Mapping[str, str] = os.environ) -> bool:
    return "TORCHELASTIC_RUN_ID" in environ or "LOCAL_RANK" in environ
