"""What a promotion writes: the promotion record (JSON: the verdict, every measure, the
thresholds, the paper ledger's digest, the time), then the live settings (TOML, for `trader
run --config`) that name the record with its digest.

The settings carry `[promotion]` (when, which ledger, the record and its digest) because they
are all a live start is sure to read, and the ledger records them at every start, so the
ramp's anchor and the evidence travel with the run; the record itself sits beside them as a
file of its own, too long for settings and meant to be read by people. The settings are the
paper daemon's own (every setting but the secrets, so live trades what paper proved, whatever
later versions' defaults), with the live broker, its capital share and ramp, and a ledger of
its own. `broker.live_confirmation` is not written: live trading stays an explicit opt-in the
user makes (in this file or the environment), as do the keys."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from trader.config.fields import leaves
from trader.config.promote_settings import PromoteSettings, PromotionSettings
from trader.config.render import _toml
from trader.domain.capital_ramp import RampStep, ramp_text
from trader.private_files import write_file
from trader.promote.measure import Evidence, file_sha256
from trader.promote.verdict import Verdict

HEADER = """\
# Live settings written by `trader promote` on {at}, from the paper ledger
# {ledger} (sha256 {digest}).
# The promotion record beside this file says why: {record}
# To trade live, opt in yourself: broker.live_confirmation = true (here or in the environment)
# and the venue's keys in the secrets directory or the environment.
"""
# Written by the promotion, not copied from paper.
LIVE_KEYS = ("broker.mode", "broker.live_confirmation", "broker.live_capital_fraction",
             "broker.live_ramp", "ledger.path")  # fmt: skip
# Not the paper daemon's to pass on: the promotion is this one; its thresholds were used here.
OWN = ("promotion", "promote")


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def record_document(
    evidence: Evidence,
    verdict: Verdict,
    thresholds: PromoteSettings,
    *,
    at: datetime,
    ledger: Path,
    fraction: Decimal,
    ramp: tuple[RampStep, ...],
) -> dict[str, Any]:
    m = evidence.measures
    return {
        "promoted_at": at.isoformat(),
        "paper_ledger": str(ledger),
        "paper_ledger_sha256": evidence.ledger_sha256,
        "passed": verdict.passed,
        "verdict": verdict.lines,
        "measures": _plain({**asdict(m), "shortfall": m.shortfall}),
        "calendar": evidence.span.calendar,
        "thresholds": _plain(thresholds.model_dump()),
        "live_capital_fraction": format(fraction, "f"),
        "live_ramp": ramp_text(ramp),
        "shortfall": evidence.shortfall_lines,
    }


def settings_toml(values: dict[str, Any], header: str) -> str:
    """`values` by dotted key, as TOML tables in the settings' own order."""
    lines, section = [header], ""
    for leaf in leaves().values():
        if leaf.key not in values or values[leaf.key] is None:
            continue
        table = ".".join(leaf.path[:-1])
        if table != section:
            section = table
            lines.append(f"\n[{table}]")
        value = values[leaf.key]
        text = json.dumps(value.isoformat()) if isinstance(value, datetime) else _toml(value)
        lines.append(f"{leaf.path[-1]} = {text}")
    return "\n".join(lines) + "\n"


def write_promotion(
    evidence: Evidence,
    verdict: Verdict,
    thresholds: PromoteSettings,
    *,
    paper_ledger: Path,
    out: Path,
    live_ledger: Path,
    fraction: Decimal,
    ramp: tuple[RampStep, ...],
    at: datetime,
) -> tuple[Path, Path]:
    """The record (beside `out`, `<name>.promotion.json`) and the live settings at `out`."""
    paper = evidence.settings
    record = out.with_name(out.stem + ".promotion.json")
    document = record_document(
        evidence, verdict, thresholds, at=at, ledger=paper_ledger, fraction=fraction, ramp=ramp
    )
    write_file(record, json.dumps(document, indent=1) + "\n", what="the live settings' folder")
    promotion = PromotionSettings(
        at=at,
        paper_ledger=paper_ledger,
        paper_ledger_sha256=evidence.ledger_sha256,
        record=record,
        record_sha256=file_sha256(record),
    )
    values = {
        leaf.key: leaf.read(paper)
        for leaf in leaves().values()
        if not leaf.is_secret and leaf.path[0] not in OWN and leaf.key not in LIVE_KEYS
    }
    values |= {
        "broker.mode": "live",
        "broker.live_capital_fraction": float(fraction),
        "broker.live_ramp": ramp_text(ramp),
        "ledger.path": live_ledger,
    }
    values |= {f"promotion.{k}": v for k, v in promotion.model_dump().items()}
    header = HEADER.format(
        at=at.isoformat(), ledger=paper_ledger, digest=evidence.ledger_sha256, record=record
    )
    text = settings_toml(values, header)
    _check(text, out)
    write_file(out, text, what="the live settings' folder")
    return out, record


def _check(text: str, out: Path) -> None:
    """The file must load as settings (a bug here must not reach a live start)."""
    import tomllib  # noqa: PLC0415 - once, here

    from trader.config.record import settings_from_record  # noqa: PLC0415

    keys = {leaf.key for leaf in leaves().values()}
    try:
        settings_from_record(_flatten(tomllib.loads(text), keys))
    except ValueError as error:
        raise ValueError(f"the live settings for {out} would not load: {error}") from error


def _flatten(table: dict[str, Any], keys: set[str], prefix: str = "") -> dict[str, Any]:
    """TOML's nested tables by the settings' dotted keys (a dict setting stays whole)."""
    out: dict[str, Any] = {}
    for name, value in table.items():
        key = f"{prefix}{name}"
        if isinstance(value, dict) and key not in keys:
            out |= _flatten(value, keys, key + ".")
        else:
            out[key] = value
    return out
