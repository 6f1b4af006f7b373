"""What `trader finetune` refuses, and how, run in this process through the verb's logic:
cuda where there is none, QLoRA on the CPU, an output folder holding files or another run,
too few bars after the split, an unknown model, and a disk that fills up while checkpointing
(the previous checkpoint stays intact)."""

from __future__ import annotations

import errno
import io
import sys
from pathlib import Path
from typing import IO

import pytest
import torch

from tests.recorded import SOLUSDT_1H, lines
from trader.cli import main
from trader.config.finetune_settings import FinetuneSettings
from trader.config.forecast_settings import ForecastSettings
from trader.config.schema import Settings
from trader.exit_codes import EX_CONFIG, EX_DATAERR, EX_TEMPFAIL, EX_UNAVAILABLE, EX_USAGE
from trader.training import checkpoint
from trader.training.command import run_finetune
from trader.training.request import FinetuneRequest

pytestmark = pytest.mark.integration

SETTINGS = Settings(
    forecast=ForecastSettings(device="cpu"),
    finetune=FinetuneSettings(
        context=32, horizon=4, batch_size=4, warmup_steps=0, log_interval=5,
        validation_interval=10, checkpoint_interval=5, validation_windows=8,
        evaluation_windows=4, evaluation_samples=4,
    ),
)  # fmt: skip


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "SOLUSDT_1h.csv"
    path.write_text("\n".join(lines(SOLUSDT_1H, 700)) + "\n")
    return path


def request(data: Path, out: Path, **changes: object) -> FinetuneRequest:
    fields: dict = {
        "model": "toto", "data": (data,), "out": out, "base": "random:small", "max_steps": 12,
    }  # fmt: skip
    return FinetuneRequest(**(fields | changes))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_where_there_is_none_exits_69_with_the_reason_and_writes_nothing(
    data, tmp_path, capsys
):
    out = tmp_path / "run"
    assert run_finetune(SETTINGS, request(data, out, device="cuda"), {}) == EX_UNAVAILABLE
    error = capsys.readouterr().err
    assert "--device cuda" in error
    assert "CPU-only build" in error or "no NVIDIA" in error or "sees no CUDA" in error
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_auto_says_it_falls_back_to_the_cpu_in_its_first_lines(data, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")  # refused once the first lines are out
    assert run_finetune(SETTINGS, request(data, out, device="auto"), {}) == EX_USAGE
    first, second, *_ = capsys.readouterr().err.splitlines()
    assert first.startswith("finetune on device=cpu")
    assert "precision float32" in first
    assert second.startswith("WARNING: training on the CPU, not a GPU: torch")


def test_qlora_on_the_cpu_is_refused_with_the_reason(data, tmp_path, capsys):
    out = tmp_path / "run"
    code = run_finetune(SETTINGS, request(data, out, qlora=True, device="cpu"), {})
    assert code == EX_UNAVAILABLE
    assert "QLoRA keeps the frozen base in 4 bits with bitsandbytes" in capsys.readouterr().err
    assert not out.exists()


def test_a_folder_holding_files_is_refused_unless_resume(data, tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert run_finetune(SETTINGS, request(data, out), {}) == EX_USAGE
    assert "pass --resume" in capsys.readouterr().err
    assert run_finetune(SETTINGS, request(data, out, resume=True), {}) == EX_USAGE
    assert "no run (no run.json) to resume" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_too_few_bars_after_the_split_exit_65_saying_what_there_is(tmp_path, capsys):
    short = tmp_path / "SOLUSDT_1h.csv"
    short.write_text("\n".join(lines(SOLUSDT_1H, 150)) + "\n")
    out = tmp_path / "run"
    assert run_finetune(SETTINGS, request(short, out), {}) == EX_DATAERR
    error = capsys.readouterr().err
    assert "part of the split holds no window of" in error
    assert "150 valid bars in all" in error
    assert not out.exists()  # nothing left behind: the same command with more data may run


def test_an_unknown_model_is_a_usage_error(data, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["finetune", "--model", "chronos", "--data", str(data), "--out", str(tmp_path)])
    assert exit_.value.code == 2
    assert "invalid choice: 'chronos'" in capsys.readouterr().err


class FullDisk(io.FileIO):
    """A file on a disk with room for `room` more bytes."""

    def __init__(self, path: Path, room: int) -> None:
        super().__init__(path, "wb")
        self.room = room

    def write(self, data) -> int:  # type: ignore[no-untyped-def]
        if len(data) > self.room:
            super().write(bytes(data)[: self.room])
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return super().write(data)


def test_a_full_disk_while_checkpointing_leaves_the_previous_checkpoint_intact(
    data, tmp_path, capsys, monkeypatch
):
    writes: list[Path] = []

    def opener(path: Path) -> IO[bytes]:
        writes.append(path)
        later = sum(p.name.startswith(".last.pt") for p in writes) > 1
        return FullDisk(path, 4096 if later else 2**40)  # type: ignore[return-value]

    monkeypatch.setattr(checkpoint, "opener", opener)
    out = tmp_path / "run"
    # The second resumable checkpoint (step 10) finds the disk full.
    assert run_finetune(SETTINGS, request(data, out), {}) == EX_TEMPFAIL
    error = capsys.readouterr().err
    assert "the checkpoint of step 10 could not be written" in error
    assert "No space left on device" in error
    assert "the one before it is intact" in error
    saved = checkpoint.load(out / "checkpoints" / "last.pt", torch.device("cpu"))
    assert saved["step"] == 5
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best.pt", "last.pt"]


def test_lora_without_peft_is_refused_before_any_data_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "peft", None)  # `import peft` raises ImportError
    unreadable = tmp_path / "SOLUSDT_1h.csv"
    unreadable.write_bytes(b"\x00\xff not bars at all\n")  # read first, this is exit 65
    out = tmp_path / "run"
    assert run_finetune(SETTINGS, request(unreadable, out, lora=True), {}) == EX_UNAVAILABLE
    error = capsys.readouterr().err
    assert "--lora needs peft" in error
    assert "pip install 'trader[finetune]'" in error
    assert not out.exists()


def test_kronos_from_a_random_base_trains_the_tokenizer_too_and_says_why(data, tmp_path, capsys):
    """The default predictor-only choice is changed (and said in the first lines); asking for
    it by name is refused with the reason before the data is read."""
    kronos = request(data, tmp_path / "run", model="kronos", max_steps=2)
    assert run_finetune(SETTINGS, kronos, {}) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("finetune on device=cpu")
    assert (
        "from a random base: training the tokenizer too (finetune.kronos_train = both,"
        in (lines[1])
    )
    assert any(line.startswith("model kronos (both) from RANDOM") for line in lines)
    asked = SETTINGS.model_copy(
        update={"finetune": SETTINGS.finetune.model_copy(update={"kronos_train": "predictor"})}
    )
    asked.finetune.model_fields_set.add("kronos_train")
    out = tmp_path / "asked"
    assert run_finetune(asked, request(tmp_path / "absent.csv", out, model="kronos"), {}) == (
        EX_CONFIG
    )
    error = capsys.readouterr().err
    assert "finetune.kronos_train = predictor from a random base is refused" in error
    assert not out.exists()
