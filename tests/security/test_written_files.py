"""Every file the program writes: a report file planted as a link in the --out folder is refused
and the file it points to untouched; reports, plots, ledgers and checkpoints are private under
a loose umask; an --out that is a file, cannot be written or is /proc/self gets one line and exit
73 from every verb that takes one; a checkpoint holding a pickled object that would run code is
refused and the code never runs."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
import torch

from tests.integration.conftest import TRADER, clean_env
from tests.recorded import SOLUSDT_1H, lines
from trader.cli import main
from trader.exit_codes import EX_CANTCREAT
from trader.private_files import UnsafePath, append_private, replacing, write_file
from trader.training import checkpoint

# A short backtest: the baseline over five days of the SOL/USDT recording, one strategy.
BACKTEST = (
    "backtest", "--data", str(SOLUSDT_1H), "--model", "baseline", "--strategy", "simple",
    "--from", "2020-12-01", "--to", "2020-12-05",
)  # fmt: skip
VICTIM_TEXT = "a file of the user's that no report may overwrite\n"


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def backtest(cwd: Path, out: Path, umask: int = 0o022) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TRADER, *BACKTEST, "--out", str(out)], cwd=cwd, capture_output=True, text=True,
        env=clean_env(TRADER_BACKTEST__CACHE_DIR=str(cwd / "cache")), timeout=300,
        check=False, umask=umask,
    )  # fmt: skip


@pytest.mark.parametrize("name", ["report.md", "stats.json"])
def test_a_report_file_planted_as_a_link_is_refused_and_its_target_untouched(tmp_path, name):
    out = tmp_path / "out"
    out.mkdir(mode=0o700)
    victim = out / "notes.txt"
    victim.write_text(VICTIM_TEXT)
    (out / name).symlink_to(victim)
    done = backtest(tmp_path, out)
    assert victim.read_text() == VICTIM_TEXT  # not a byte written through the link
    assert (out / name).is_symlink()
    assert done.returncode == EX_CANTCREAT, done.stderr
    assert "Traceback" not in done.stderr
    (refusal,) = [line for line in done.stderr.splitlines() if "symbolic link" in line]
    assert str(out / name) in refusal


def test_a_backtest_report_its_plots_and_ledgers_are_private_under_a_loose_umask(tmp_path):
    out = tmp_path / "out"
    done = backtest(tmp_path, out, umask=0o000)
    assert done.returncode == 0, done.stderr
    written = sorted(out.rglob("*"))
    names = {p.name for p in written}
    assert {"report.md", "report.html", "stats.json", "ledgers"} <= names
    assert any(n.endswith(".png") for n in names)
    assert mode(out) == 0o700
    wrong = {str(p): oct(mode(p)) for p in written if mode(p) != (0o700 if p.is_dir() else 0o600)}
    assert wrong == {}
    assert not [n for n in names if n.endswith(".tmp")]  # no temporary file left behind


def _args(verb: str, data: Path, out: Path) -> list[str]:
    csv = str(data)
    return {
        "backtest": ["backtest", "--data", csv, "--model", "baseline", "--out", str(out)],
        "grid": ["backtest", "--data", csv, "--model", "baseline", "--grid",
                 "strategy.position_fraction=0.1,0.2", "--out", str(out)],
        "walk-forward": ["backtest", "--data", csv, "--model", "baseline", "--grid",
                         "strategy.position_fraction=0.1,0.2", "--walk-forward", "200/100",
                         "--out", str(out)],
        "evaluate": ["evaluate", "--data", csv, "--model", "baseline", "--out", str(out)],
        "finetune": ["finetune", "--model", "toto", "--data", csv, "--base", "random:small",
                     "--max-steps", "2", "--out", str(out)],
    }[verb]  # fmt: skip


def _unwritable(tmp: Path) -> Path:
    if os.geteuid() == 0:
        pytest.skip("root writes any folder whatever its mode")
    folder = tmp / "read-only"
    folder.mkdir(mode=0o500)
    return folder / "out"


BAD_OUTS = {
    "a file": lambda tmp: _file(tmp / "out.txt"),
    "/proc/self": lambda tmp: Path("/proc/self"),
    "inside a file": lambda tmp: _file(tmp / "out.txt") / "report",
    "a read-only folder": _unwritable,
}


def _file(path: Path) -> Path:
    path.write_text(VICTIM_TEXT)
    return path


@pytest.mark.parametrize("verb", ["backtest", "grid", "walk-forward", "evaluate", "finetune"])
@pytest.mark.parametrize("bad", list(BAD_OUTS))
def test_an_out_that_cannot_take_files_is_one_line_and_exit_73(tmp_path, capsys, verb, bad):
    data = tmp_path / "SOLUSDT_1h.csv"
    data.write_text("\n".join(lines(SOLUSDT_1H, 700)) + "\n")
    out = BAD_OUTS[bad](tmp_path)
    assert main(_args(verb, data, out)) == EX_CANTCREAT
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert len(error.strip().splitlines()) == 1, error
    assert str(out) in error
    if out.name == "out.txt":
        assert out.read_text() == VICTIM_TEXT


def test_the_real_cli_refuses_out_as_a_file_without_a_traceback(tmp_path):
    out = _file(tmp_path / "out.txt")
    done = backtest(tmp_path, out)
    assert done.returncode == EX_CANTCREAT
    assert done.stderr.strip() == f"trader backtest: --out {out} is a file, not a folder; " + (
        "choose another --out"
    )
    assert out.read_text() == VICTIM_TEXT


class Payload:
    """An object whose unpickling runs code: it writes the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, ...]]:
        return (Path.write_text, (self.marker, "the checkpoint ran code"))  # type: ignore[return-value]


def test_a_checkpoint_holding_a_pickled_object_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "checkpoints" / checkpoint.LAST
    path.parent.mkdir()
    torch.save({"format": checkpoint.FORMAT, "step": 5, "model": Payload(marker)}, path)
    with pytest.raises(checkpoint.CheckpointRefused) as refused:
        checkpoint.load(path, torch.device("cpu"))
    assert not marker.exists()
    assert str(path) in str(refused.value)
    assert "refused" in str(refused.value)


def test_a_checkpoint_is_private_and_one_written_over_a_planted_link_is_refused(tmp_path):
    folder = tmp_path / "run" / "checkpoints"
    payload = {"format": checkpoint.FORMAT, "step": 1, "rng": checkpoint.rng_state(
        torch.device("cpu"))}  # fmt: skip
    old = os.umask(0)
    try:
        checkpoint.save_atomic(folder / checkpoint.LAST, payload)
    finally:
        os.umask(old)
    assert (mode(folder), mode(folder / checkpoint.LAST)) == (0o700, 0o600)
    loaded = checkpoint.load(folder / checkpoint.LAST, torch.device("cpu"))
    assert loaded["step"] == 1
    checkpoint.restore_rng(loaded["rng"], torch.device("cpu"))  # plain tensors and values
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    (folder / checkpoint.BEST).symlink_to(victim)
    with pytest.raises(UnsafePath, match="symbolic link"):
        checkpoint.save_atomic(folder / checkpoint.BEST, payload)
    assert victim.read_text() == VICTIM_TEXT


def test_a_link_in_place_of_the_evidence_folder_is_refused_and_nothing_written_there(tmp_path):
    from trader.training.evidence import Evidence  # noqa: PLC0415 - torch

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    (run / "evidence").symlink_to(elsewhere)
    with pytest.raises(UnsafePath, match="symbolic link"):
        Evidence(run / "evidence").line("finetune on device=cpu")
    with pytest.raises(UnsafePath, match="symbolic link"):
        append_private(run / "evidence" / "training_log.txt", "step 1\n")
    assert list(elsewhere.iterdir()) == []


def test_evidence_lines_are_private_and_a_planted_log_link_is_refused(tmp_path):
    from trader.training.evidence import Evidence  # noqa: PLC0415 - torch

    old = os.umask(0)
    try:
        evidence = Evidence(tmp_path / "run" / "evidence")
        evidence.line("step 1")
        evidence.record({"kind": "train", "step": 1, "loss": 0.5})
    finally:
        os.umask(old)
    folder = evidence.folder
    assert [mode(folder), mode(folder / "training_log.txt"), mode(folder / "metrics.jsonl")] == [
        0o700, 0o600, 0o600,
    ]  # fmt: skip
    victim = tmp_path / "victim"
    victim.write_text(VICTIM_TEXT)
    (folder / "training_log.txt").unlink()
    (folder / "training_log.txt").symlink_to(victim)
    with pytest.raises(UnsafePath, match="symbolic link"):
        evidence.line("step 2")
    assert victim.read_text() == VICTIM_TEXT


class Full(Exception):
    """The disk filling up half-way through a write."""


def _half_written(path: Path) -> None:
    with replacing(path) as handle:
        handle.write(b'{"half": ')
        raise Full


def test_a_failed_write_leaves_the_old_file_whole_and_no_temporary_file(tmp_path):
    path = write_file(tmp_path / "stats.json", "{}\n")
    with pytest.raises(Full):
        _half_written(path)
    assert path.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stats.json"]


def test_finetune_resume_refuses_a_planted_checkpoint_and_its_code_never_runs(tmp_path, capsys):
    from tests.integration.test_finetune_refusals import SETTINGS, request  # noqa: PLC0415
    from trader.exit_codes import EX_DATAERR  # noqa: PLC0415
    from trader.training.command import run_finetune  # noqa: PLC0415

    data = tmp_path / "SOLUSDT_1h.csv"
    data.write_text("\n".join(lines(SOLUSDT_1H, 700)) + "\n")
    out = tmp_path / "run"
    assert run_finetune(SETTINGS, request(data, out, max_steps=5), {}) == 0
    last = out / "checkpoints" / checkpoint.LAST
    marker = tmp_path / "marker"
    saved = checkpoint.load(last, torch.device("cpu"))
    torch.save(saved | {"model": Payload(marker)}, last)  # a neighbour's, or a tampered copy
    capsys.readouterr()
    assert run_finetune(SETTINGS, request(data, out, max_steps=10, resume=True), {}) == EX_DATAERR
    error = capsys.readouterr().err
    assert not marker.exists()
    (refusal,) = [line for line in error.splitlines() if str(last) in line]
    assert "holds objects other than tensors and plain values" in refusal
