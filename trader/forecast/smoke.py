"""A device smoke test: the operations the models run, on the device, checked against float64
on the CPU. A build without kernels for the GPU can pass `is_available()` and a matmul (cuBLAS
carries its own kernels) and still fail in attention or an elementwise kernel, so each kind of
operation is run, synchronised (CUDA errors are asynchronous) and compared, and each result
must be on the device asked for (nothing quietly computed on the CPU)."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# Largest error relative to the reference's magnitude. float32 on GPUs may use TF32 in matmuls.
FLOAT32_TOLERANCE = 2e-3
BFLOAT16_TOLERANCE = 4e-2


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    seconds: float
    detail: str  # the error found, or why it failed


@dataclass(frozen=True)
class SmokeReport:
    device: str
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        return all(check.ok for check in self.checks)

    @property
    def failure(self) -> str | None:
        """The first failed check, as one phrase."""
        for check in self.checks:
            if not check.ok:
                return f"{check.name} failed on {self.device}: {check.detail}"
        return None

    def lines(self) -> list[str]:
        return [
            f"{'ok  ' if c.ok else 'FAIL'} {c.name:<22} {c.seconds * 1000:9.1f} ms  {c.detail}"
            for c in self.checks
        ]


Case = Callable[[torch.device], tuple[torch.Tensor, torch.Tensor]]


def run_smoke_test(device: torch.device, *, bf16: bool) -> SmokeReport:
    """Every check on `device`; bf16 ones only where the device claims native bfloat16."""
    cases: list[tuple[str, Case, float]] = [
        ("matmul float32", _matmul(torch.float32), FLOAT32_TOLERANCE),
        ("attention float32", _attention(torch.float32), FLOAT32_TOLERANCE),
        ("lstm+conv float32", _lstm_conv, FLOAT32_TOLERANCE),
    ]
    if bf16:
        cases += [
            ("matmul bfloat16", _matmul(torch.bfloat16), BFLOAT16_TOLERANCE),
            ("attention bfloat16", _attention(torch.bfloat16), BFLOAT16_TOLERANCE),
        ]
    return SmokeReport(str(device), tuple(_check(n, c, t, device) for n, c, t in cases))


def _check(name: str, case: Case, tolerance: float, device: torch.device) -> Check:
    began = time.perf_counter()
    try:
        actual, expected = case(device)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        if actual.device.type != device.type:
            raise RuntimeError(f"the result is on {actual.device}, not {device}")
        error = _relative_error(actual, expected)
    except Exception as failure:  # any failure is the finding: report it, do not raise
        lines = str(failure).strip().splitlines() or [type(failure).__name__]
        return Check(name, False, time.perf_counter() - began, lines[0])
    seconds = time.perf_counter() - began
    ok = error <= tolerance  # NaN compares false: a NaN result fails
    detail = f"max error {error:.1e}" + ("" if ok else f" exceeds {tolerance:.0e}")
    return Check(name, ok, seconds, detail)


def _relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    got = actual.detach().to("cpu", torch.float64)
    scale = max(float(expected.abs().max()), 1e-6)
    return float((got - expected).abs().max()) / scale


def _inputs(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _matmul(dtype: torch.dtype) -> Case:
    def case(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = _inputs(256, 192, seed=1), _inputs(192, 128, seed=2)
        actual = a.to(device, dtype) @ b.to(device, dtype)
        return actual, a.double() @ b.double()

    return case


def _attention(dtype: torch.dtype) -> Case:
    def case(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = (_inputs(2, 4, 96, 32, seed=s) for s in (3, 4, 5))
        qd, kd, vd = (t.to(device, dtype) for t in (q, k, v))
        actual = F.scaled_dot_product_attention(qd, kd, vd, is_causal=True)
        scores = (q.double() @ k.double().transpose(-1, -2)) / 32**0.5
        mask = torch.ones(96, 96, dtype=torch.bool).tril()
        weights = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        return actual, weights @ v.double()

    return case


def _lstm_conv(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """A recurrent step and a convolution: kernels of their own (cuDNN), unlike the matmul."""
    with torch.random.fork_rng(devices=[]):  # fixed weights, the caller's RNG untouched
        torch.manual_seed(0)
        reference = nn.Sequential(_Conv(), nn.LSTM(16, 24, batch_first=True)).double().eval()
    model = copy.deepcopy(reference).float().to(device)
    x = _inputs(3, 40, 16, seed=6)
    with torch.inference_mode():
        actual, _ = model(x.to(device))
        expected, _ = reference(x.double())
    return actual, expected


class _Conv(nn.Module):
    """Conv1d over time on [batch, time, features]."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(16, 16, kernel_size=3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x.transpose(1, 2))).transpose(1, 2)
