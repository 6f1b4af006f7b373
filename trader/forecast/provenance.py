"""Where a model's weights came from, as the weights file itself says: `trader finetune` and the
random checkpoints record their provenance as JSON in the safetensors header's metadata (a
sidecar file can be lost or left behind; the header travels with the tensors and the reference
packages ignore it). Read without torch: the header is 8 bytes of length and JSON.

A folder whose file records nothing is described by where it lies: the Hugging Face cache names
the published repository and its revision; anything else is "origin unknown" (weights written
before trader recorded provenance, or by something else)."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trader.config.forecast_settings import ForecastSettings
from trader.forecast.build import weights_sources
from trader.logging import get_logger
from trader.private_files import write_file

KEY = "trader.provenance"  # the metadata entry: one JSON object
WEIGHTS_FILE = "model.safetensors"
_MAX_HEADER = 100 * 2**20  # safetensors' own limit on the header's length
_CACHE = re.compile(r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<revision>[^/]+)")
RANDOM_WARNING = "RANDOM weights: their forecasts mean nothing; do not trade on them"


def _header(data: bytes, source: Path) -> tuple[dict[str, Any], int]:
    """The header of a safetensors file's first bytes, and where its tensors' data begins."""
    if len(data) < 8:
        raise ValueError(f"{source}: too short for a safetensors header")
    (size,) = struct.unpack("<Q", data[:8])
    if size > _MAX_HEADER or len(data) < 8 + size:
        raise ValueError(f"{source}: not a safetensors file (header of {size} bytes)")
    header = json.loads(data[8 : 8 + size])
    if not isinstance(header, dict):
        raise ValueError(f"{source}: the safetensors header is not an object")
    return header, 8 + size


def read_provenance(directory: Path) -> dict[str, Any] | None:
    """The provenance `directory/model.safetensors` records, None when it records none;
    ValueError (or OSError) for a file whose header cannot be read."""
    path = directory / WEIGHTS_FILE
    with path.open("rb") as handle:
        head = handle.read(8)
        size = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
        header, _ = _header(head + handle.read(min(size, _MAX_HEADER)), path)
    raw = (header.get("__metadata__") or {}).get(KEY)
    if raw is None:
        return None
    record = json.loads(raw)
    if not isinstance(record, dict):
        raise ValueError(f"{path}: its {KEY} metadata is not a JSON object")
    return record


def metadata(provenance: dict[str, Any]) -> dict[str, str]:
    """The safetensors metadata that records `provenance` (for `safetensors.torch.save`)."""
    return {KEY: json.dumps(provenance, sort_keys=True, separators=(",", ":"))}


def stamp(directory: Path, provenance: dict[str, Any]) -> None:
    """Record `provenance` in `directory/model.safetensors`, its tensors' bytes untouched:
    the header rewritten (padded to 8 bytes, as safetensors aligns it), the file replaced
    whole (`write_file`)."""
    path = directory / WEIGHTS_FILE
    data = path.read_bytes()
    header, start = _header(data, path)
    header["__metadata__"] = dict(header.get("__metadata__") or {}) | metadata(provenance)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    write_file(path, struct.pack("<Q", len(text)) + text + data[start:], what="the weights folder")


@dataclass(frozen=True)
class Origin:
    """What one model's weights are, in a line, with the warnings to say beside it."""

    model: str  # toto, toto2, kronos (or "kronos predictor" when its halves differ)
    folder: str  # where they load from ("" when not on this machine)
    kind: str  # finetuned, random, published or unknown
    text: str
    warnings: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)  # for trader_model_info

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "origin": self.kind, "text": self.text,
                "folder": self.folder, "warnings": list(self.warnings)}  # fmt: skip

    def lines(self) -> list[str]:
        where = f" ({self.folder})" if self.folder else ""
        return [
            f"weights of {self.model}: {self.text}{where}",
            *self.warning_lines(),
        ]

    def warning_lines(self) -> list[str]:
        return [f"WARNING: {w}" for w in self.warnings]


def origins(
    name: str,
    settings: ForecastSettings,
    *,
    model_path: Path | None = None,
    tokenizer_path: Path | None = None,
) -> list[Origin]:
    """The origin of each checkpoint `build_forecaster` would load for `name` (none for the
    baseline), found where it would find them, never downloading."""
    sources = weights_sources(name, settings, model_path=model_path, tokenizer_path=tokenizer_path)
    if not sources:
        return []
    from trader.forecast.weights import WeightsUnavailable, locate  # noqa: PLC0415 - torch

    token = settings.hf_token.get_secret_value() if settings.hf_token else None
    parts = ["predictor", "tokenizer"] if len(sources) == 2 else [""] * len(sources)
    found = []
    for part, source in zip(parts, sources, strict=True):
        label = f"{name} {part}".strip()
        try:
            folder = locate(str(source), weights_dir=settings.weights_dir, token=token)
        except WeightsUnavailable:
            where = "downloaded at load" if settings.download else "the load will say where"
            text = f"{source}: not on this machine ({where}); no provenance to read"
            found.append(Origin(label, "", "unknown", text, labels=_labels(label, "unknown")))
            continue
        found.append(describe(label, folder))
    if len(found) == 2 and found[0].text == found[1].text:  # a pair written by one run
        first = found[0]
        pair = str(Path(first.folder).parent) if first.folder else ""
        return [Origin(name, pair, first.kind, first.text, first.warnings,
                       first.labels | {"model": name})]  # fmt: skip
    return found


def published(folder: Path) -> tuple[str, str] | None:
    """The repository and revision of a folder of the Hugging Face cache, else None."""
    cached = _CACHE.search(folder.resolve().as_posix())
    return None if cached is None else (f"{cached['org']}/{cached['name']}", cached["revision"])


def model_labels(name: str, settings: ForecastSettings) -> list[dict[str, str]]:
    """`trader_model_info`'s label sets for the model `name`: one per checkpoint, or origin
    "none" for a model without weights (the baseline), so every daemon has the series."""
    return [o.labels for o in origins(name, settings)] or [_labels(name, "none")]


def log_origins(names: Iterable[str], settings: ForecastSettings) -> list[Origin]:
    """The origins of the models `names`, logged (the warnings as warnings): what a daemon
    says in its first lines."""
    log = get_logger("trader.forecast")
    found = [origin for name in names for origin in origins(name, settings)]
    for origin in found:
        log.info(
            "weights origin", model=origin.model, origin=origin.kind, weights=origin.text,
            folder=origin.folder,
        )  # fmt: skip
        for warning in origin.warnings:
            log.warning("weights warning", model=origin.model, warning=warning)
    return found


def describe(model: str, folder: Path) -> Origin:
    """The origin of the checkpoint in `folder`."""
    try:
        record = read_provenance(folder)
    except (OSError, ValueError) as error:
        text = f"origin unknown: {folder}: its provenance cannot be read ({error})"
        return Origin(model, str(folder), "unknown", text, labels=_labels(model, "unknown"))
    if record is not None:
        return _recorded(model, folder, record)
    cached = published(folder)
    if cached:
        repo, revision = cached
        text = f"published {repo} revision {revision} (the Hugging Face cache)"
        return Origin(model, str(folder), "published", text,
                      labels=_labels(model, "published", base=repo, revision=revision))  # fmt: skip
    from trader.forecast.toto2.loading import random_label  # noqa: PLC0415 - torch

    marked = random_label(folder)  # random Toto 2.0 weights written before the metadata
    if marked is not None:
        return Origin(model, str(folder), "random", marked, (RANDOM_WARNING,),
                      _labels(model, "random", base="random"))  # fmt: skip
    text = (
        f"origin unknown: {folder} records none (written before trader recorded provenance, "
        "or not by trader finetune)"
    )
    return Origin(model, str(folder), "unknown", text, labels=_labels(model, "unknown"))


def _recorded(model: str, folder: Path, record: dict[str, Any]) -> Origin:
    base = record.get("base") or {}
    base_name = str(base.get("name") or base.get("label") or "unknown")
    if record.get("kind") == "random":
        text = str(base.get("label", "RANDOM weights"))
        return Origin(model, str(folder), "random", text, (RANDOM_WARNING,),
                      _labels(model, "random", base=base_name))  # fmt: skip
    warnings = []
    if base.get("random"):
        warnings.append(
            f"fine-tuned from a RANDOM base ({base_name}): its forecasts mean nothing, "
            "whatever its verdict says; do not trade on them"
        )
    verdict = record.get("verdict")
    if verdict is None:
        judged, said = "not judged", "not judged (the run ended before its evaluation)"
        warnings.append("never judged against its base and the naive forecast")
    else:
        judged, said = ("helped" if verdict.get("helped") else "did not help"), verdict["text"]
        if not verdict.get("helped"):
            warnings.append(f"fine-tuning did NOT help: {verdict['text']}")
        elif not verdict.get("beats_naive"):
            warnings.append("the fine-tuned model does NOT beat the naive forecast")
    data = record.get("data") or {}
    steps = record.get("steps") or {}
    text = (
        f"fine-tuned by {record.get('written_by', 'trader finetune')} from {base_name} on "
        f"{_data_text(data)}, {steps.get('done', '?')} steps (weights of step "
        f"{steps.get('weights', '?')}), {record.get('objective', {}).get('trained', '?')}; "
        f"verdict: {said}"
    )
    labels = _labels(
        model, "finetuned", base=base_name, verdict=judged,
        data=str(data.get("sha256", ""))[:16], steps=str(steps.get("done", "")),
    )  # fmt: skip
    return Origin(model, str(folder), "finetuned", text, tuple(warnings), labels)


def _data_text(data: dict[str, Any]) -> str:
    files = data.get("files") or []
    names = ", ".join(
        f"{Path(str(f.get('file', '?'))).name} ({f.get('rows', '?')} rows, {f.get('first', '?')}"
        f" to {f.get('last', '?')})"
        for f in files
    )
    return f"{names or 'no files recorded'}, sha256 {str(data.get('sha256', '?'))[:16]}"


def _labels(model: str, origin: str, **more: str) -> dict[str, str]:
    """`trader_model_info`'s labels: the same keys for every origin."""
    empty = dict.fromkeys(("base", "revision", "verdict", "data", "steps"), "")
    return {"model": model, "origin": origin} | empty | more
