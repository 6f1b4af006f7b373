"""`trader finetune`: fine-tune Toto or Kronos on files of bars, with evidence, and judge the
result against its start and the naive forecast on a held-out tail."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from trader.cli.options import (
    Verbs,
    add_reading_options,
    load,
    out_refused,
    positive,
    reading_options,
)


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    finetune = verbs.add_parser(
        "finetune",
        parents=[common],
        help="fine-tune Toto or Kronos on your bars; weights, evidence and a verdict",
        description="Fine-tune a model on files of bars (windows sampled across them; split "
        "by time into train, validation and a held-out test tail with purged gaps), on the "
        "device the daemon would use (cuda never falls back; auto says so when it does), "
        "with checkpoints (--resume continues), LoRA, and DDP under torchrun. Writes "
        "DIR/weights (the published format), DIR/eval.json (base, fine-tuned and naive on "
        "the test tail) and DIR/evidence/. Nothing replaces the serving weights. Exit 0: done "
        "(or stopped by SIGINT/SIGTERM with a checkpoint); 2: bad arguments; 64: DIR holds "
        "another run; 65: the data cannot be used; 69: the device, weights or LoRA are "
        "unavailable; 75: a checkpoint could not be written (disk full; the previous one is "
        "intact); 78: settings refused.",
    )
    finetune.add_argument("--model", choices=["toto", "kronos"], required=True)
    finetune.add_argument(
        "--data", type=Path, nargs="+", required=True, metavar="FILE",
        help="CSV or Parquet files of bars, one symbol each (as `trader download` writes)",
    )  # fmt: skip
    finetune.add_argument(
        "--symbol", action="append", help="symbol of each file, in order (default: its name)"
    )
    finetune.add_argument(
        "--base",
        metavar="DIR|random:small",
        help="a published checkpoint folder (default: the configured model's weights), or "
        "random:small: random weights of a small configuration (tests and demos)",
    )
    finetune.add_argument("--out", type=Path, required=True, metavar="DIR", help="run folder")
    finetune.add_argument("--device", help="auto, cpu, cuda or cuda:N (default: forecast.device)")
    steps = finetune.add_mutually_exclusive_group()
    steps.add_argument("--max-steps", type=positive, metavar="N", help="optimizer steps")
    steps.add_argument("--epochs", type=positive, metavar="N", help="passes over the windows")
    finetune.add_argument(
        "--lora", action="store_true", help="train LoRA adapters, merged into the weights"
    )
    finetune.add_argument(
        "--qlora",
        action="store_true",
        help="LoRA on a 4-bit base (bitsandbytes; CUDA only, refused elsewhere)",
    )
    finetune.add_argument(
        "--resume", action="store_true", help="continue the run DIR holds from its checkpoint"
    )
    finetune.add_argument(
        "--nproc-per-node",
        type=positive,
        metavar="N",
        help="start N processes with torchrun on this machine (DDP; for several machines run "
        "torchrun yourself)",
    )
    add_reading_options(finetune).set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if (refused := out_refused("finetune", args.out)) is not None:
        return refused
    if args.nproc_per_node and "LOCAL_RANK" not in os.environ:
        return _torchrun(args.nproc_per_node)
    from trader.training.command import run_finetune  # noqa: PLC0415 - torch
    from trader.training.request import FinetuneRequest  # noqa: PLC0415

    settings = load(args).settings
    request = FinetuneRequest(
        model=args.model, data=tuple(args.data), symbols=tuple(args.symbol or ()),
        out=args.out, base=args.base,
        device=args.device, max_steps=args.max_steps, epochs=args.epochs, lora=args.lora,
        qlora=args.qlora, resume=args.resume, reading=reading_options(args),
        argv=("trader", *sys.argv[1:]),
    )  # fmt: skip
    return run_finetune(settings, request)


def _torchrun(processes: int) -> int:
    """This command again, as `processes` workers of torch's own launcher on this machine."""
    argv, rest = sys.argv[1:], []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--nproc-per-node":
            skip = True
        elif not arg.startswith("--nproc-per-node="):
            rest.append(arg)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        f"--nproc-per-node={processes}", "-m", "trader", *rest,
    ]  # fmt: skip
    return subprocess.run(command, check=False).returncode  # noqa: S603 - our own argv
