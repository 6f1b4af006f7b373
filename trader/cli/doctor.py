"""`trader doctor`: the device checks the daemon makes at start-up, as a report with a verdict."""

from __future__ import annotations

import argparse
from pathlib import Path

from trader.cli.options import Verbs, add_check_arguments, load


def add(verbs: Verbs, common: argparse.ArgumentParser) -> None:
    doctor = verbs.add_parser(
        "doctor",
        parents=[common],
        help="check the device (CUDA/CPU) the models would run on; write an evidence folder",
        description="Run the daemon's device checks (torch build against the GPU's compute "
        "capability, a smoke test on the device, a short forecast) and print a report with a "
        "verdict. Exit 0: usable; 1: running on the CPU although a GPU is present; 69: the "
        "device asked for is unusable (the daemon would refuse to start); 70: a forecast on "
        "the chosen device fails. With --venue alpaca: a read-only look at the Alpaca account "
        "the daemon's keys open instead (exit 0 OK, 1 DEGRADED, 69 UNUSABLE, 75 no answer, 78 "
        "no keys).",
    )
    add_check_arguments(doctor)
    doctor.add_argument(
        "--evidence", type=Path, metavar="DIR", help="write the evidence folder for a bug report"
    )
    doctor.add_argument(
        "--model", choices=["toto", "toto2", "kronos"], help="model of the forecast check"
    )
    doctor.add_argument("--data", type=Path, help="bars to forecast (default: a random walk)")
    doctor.add_argument(
        "--no-inference", action="store_true", help="skip the forecast on the chosen device"
    )
    doctor.add_argument(
        "--venue",
        choices=["alpaca"],
        help="instead of the device: the Alpaca account (status, blocks, crypto, shorting, "
        "margin, day trades, equity, the data feed) and what the daemon does about each; "
        "read only",
    )
    doctor.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    loaded = load(args)
    if args.venue == "alpaca":
        from trader.doctor.alpaca_look import run_venue_doctor  # noqa: PLC0415 - the SDK

        return run_venue_doctor(loaded.settings, loaded.secret_values())
    from trader.doctor.command import DoctorOptions, run_doctor  # noqa: PLC0415 - torch

    options = DoctorOptions(
        args.device,
        args.evidence,
        args.model,
        args.weights,
        args.tokenizer,
        args.size,
        args.data,
        inference=not args.no_inference,
    )
    return run_doctor(loaded.settings, options, loaded.secret_values())
