"""The doctor's verdict and exit code, from the device findings and the inference smoke."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trader.exit_codes import EX_SOFTWARE, EX_UNAVAILABLE

if TYPE_CHECKING:  # torch: `trader doctor --venue` reads the verdict's form without it
    from trader.doctor.devices import DeviceFindings
    from trader.doctor.inference import InferenceSmoke

EX_OK = 0
EX_DEGRADED = 1  # works, but on the CPU although a GPU is present


@dataclass(frozen=True)
class Verdict:
    status: str  # OK, DEGRADED, UNUSABLE or FAILED
    summary: str
    exit_code: int

    @property
    def line(self) -> str:
        return f"verdict: {self.status}: {self.summary}"


def verdict(findings: DeviceFindings, inference: InferenceSmoke | None) -> Verdict:
    choice = findings.choice
    if choice is None:
        return Verdict("UNUSABLE", f"{findings.error}", EX_UNAVAILABLE)
    if inference is not None and not inference.ok:
        return Verdict("FAILED", f"{choice.device} was chosen but {inference.summary}", EX_SOFTWARE)
    if choice.device.type == "cpu":
        where = f"CPU ({choice.name})"
        if choice.fallback and findings.gpu_present:
            return Verdict(
                "DEGRADED",
                f"forecasts run on the {where} although a GPU is present: {choice.fallback}",
                EX_DEGRADED,
            )
        why = choice.fallback or choice.reason
        return Verdict("OK", f"forecasts run on the {where}: {why}", EX_OK)
    bf16 = "native bfloat16" if choice.bf16 else "no native bfloat16"
    return Verdict(
        "OK",
        f"forecasts run on {choice.device}: {choice.name} (compute capability "
        f"{choice.describe()['capability']}, {bf16}), {choice.precision}",
        EX_OK,
    )
