"""The origin of weights, read from the safetensors header: stamped without touching the
tensors, said for random, fine-tuned, published (the Hugging Face cache) and older files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from trader.config.forecast_settings import ForecastSettings
from trader.forecast.provenance import KEY, describe, model_labels, origins, read_provenance, stamp
from trader.forecast.random_weights import write_random_kronos, write_random_toto

REVISION = "0123456789abcdef0123456789abcdef01234567"


def checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """A checkpoint as written before trader recorded provenance: no metadata."""
    tensors = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([7], dtype=torch.int64)}
    folder.mkdir(parents=True)
    save_file(tensors, folder / "model.safetensors")
    (folder / "config.json").write_text("{}")
    return tensors


def finetuned(helped: bool | None, *, random: bool = False) -> dict:
    said = "helped" if helped else "did NOT help"
    verdict = None
    if helped is not None:
        verdict = {"helped": helped, "beats_naive": helped, "text": f"fine-tuning {said}: CRPS 1"}
    base = {"name": "random:small" if random else "Org/Model", "random": random}
    return {
        "kind": "finetuned", "written_by": "trader 9 finetune", "base": base,
        "data": {"files": [{"file": "/x/SOL_1h.csv", "rows": 10, "first": "a", "last": "b"}],
                 "sha256": "ab" * 32},
        "steps": {"done": 5, "weights": 4}, "objective": {"trained": "toto (every weight)"},
        "verdict": verdict,
    }  # fmt: skip


def test_stamping_keeps_every_tensor_and_safetensors_reads_the_record(tmp_path):
    tensors = checkpoint(tmp_path / "w")
    record = finetuned(True)
    stamp(tmp_path / "w", record)
    data = (tmp_path / "w" / "model.safetensors").read_bytes()
    assert struct.unpack("<Q", data[:8])[0] % 8 == 0  # aligned as safetensors writes it
    loaded = load_file(tmp_path / "w" / "model.safetensors")
    assert loaded.keys() == tensors.keys()
    assert all(torch.equal(loaded[k], t) for k, t in tensors.items())
    with safe_open(tmp_path / "w" / "model.safetensors", "pt") as handle:
        assert json.loads(handle.metadata()[KEY]) == record
    assert read_provenance(tmp_path / "w") == record
    stamp(tmp_path / "w", finetuned(False))  # stamped again: the verdict replaces the first
    assert read_provenance(tmp_path / "w") == finetuned(False)


def test_an_older_file_without_a_record_is_origin_unknown(tmp_path):
    checkpoint(tmp_path / "old")
    origin = describe("toto", tmp_path / "old")
    assert origin.kind == "unknown"
    assert origin.text.startswith("origin unknown: ")
    assert "records none" in origin.text
    assert origin.warnings == ()


def test_a_damaged_header_is_said_not_raised(tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}")
    origin = describe("toto", tmp_path / "bad")
    assert origin.kind == "unknown"
    assert "its provenance cannot be read" in origin.text


def test_the_hugging_face_cache_names_the_published_repository_and_revision(tmp_path):
    folder = tmp_path / "hub" / "models--Datadog--Toto-Open-Base-1.0" / "snapshots" / REVISION
    checkpoint(folder)
    origin = describe("toto", folder)
    assert origin.kind == "published"
    assert origin.text.startswith(f"published Datadog/Toto-Open-Base-1.0 revision {REVISION}")
    assert origin.labels["revision"] == REVISION


@pytest.mark.parametrize(
    ("helped", "random", "warnings"),
    [
        (True, False, []),
        (False, False, ["fine-tuning did NOT help: fine-tuning did NOT help: CRPS 1"]),
        (None, False, ["never judged against its base and the naive forecast"]),
        (True, True, ["fine-tuned from a RANDOM base (random:small): its forecasts mean"]),
    ],
)
def test_fine_tuned_weights_warn_for_a_random_base_and_a_verdict_that_did_not_help(
    tmp_path, helped, random, warnings
):
    checkpoint(tmp_path / "w")
    stamp(tmp_path / "w", finetuned(helped, random=random))
    origin = describe("toto", tmp_path / "w")
    assert origin.kind == "finetuned"
    assert origin.text.startswith("fine-tuned by trader 9 finetune from ")
    assert "SOL_1h.csv (10 rows, a to b), sha256 abababababababab, 5 steps" in origin.text
    assert [w[: len(expected)] for w, expected in zip(origin.warnings, warnings, strict=True)] == (
        warnings
    )
    verdict = {True: "helped", False: "did not help", None: "not judged"}[helped]
    assert origin.labels["verdict"] == verdict


def test_random_checkpoints_say_so_and_a_kronos_pair_is_one_origin(tmp_path):
    write_random_toto(tmp_path / "toto", "small", seed=3)
    [toto] = origins("toto", ForecastSettings(), model_path=tmp_path / "toto")
    assert toto.kind == "random"
    assert toto.text.startswith("RANDOM weights in a small toto architecture")
    assert toto.warnings[0].startswith("RANDOM weights: their forecasts mean nothing")
    assert toto.labels["base"] == "random:small"
    write_random_kronos(tmp_path / "kronos", "small")
    [kronos] = origins("kronos", ForecastSettings(weights_dir=tmp_path / "kronos"))
    assert (kronos.model, kronos.kind) == ("kronos", "random")


def test_the_baseline_has_no_weights_and_one_label_set(tmp_path):
    assert origins("baseline", ForecastSettings()) == []
    assert model_labels("baseline", ForecastSettings())[0] | {} == {
        "model": "baseline", "origin": "none", "base": "", "revision": "", "verdict": "",
        "data": "", "steps": "",
    }  # fmt: skip


def test_weights_that_are_nowhere_here_are_said_without_downloading(tmp_path):
    settings = ForecastSettings(download=False, weights_dir=tmp_path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
        patch.setenv("HF_HUB_OFFLINE", "1")
        [origin] = origins("toto", settings)
    assert origin.kind == "unknown"
    assert "not on this machine" in origin.text
