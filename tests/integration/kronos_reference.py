"""The reference Kronos (PyPI `kronos-model-arch`, module `model`) as a yardstick: random-weight
checkpoints in the published format, written by the reference classes themselves, and the
reference predictor's output on recorded bars."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from trader.domain import Bar
from trader.domain.time import Timeframe

# The published configurations (config.json of NeoQuasar/Kronos-small, -mini, and of
# Kronos-Tokenizer-base, -2k; the tokenizers differ only in group_size, which inference ignores).
TOKENIZER_BASE = {
    "d_in": 6, "d_model": 256, "n_heads": 4, "ff_dim": 512, "n_enc_layers": 4,
    "n_dec_layers": 4, "ffn_dropout_p": 0.0, "attn_dropout_p": 0.0, "resid_dropout_p": 0.0,
    "s1_bits": 10, "s2_bits": 10, "beta": 0.05, "gamma0": 1.0, "gamma": 1.1, "zeta": 0.05,
    "group_size": 4,
}  # fmt: skip
TOKENIZER_2K = TOKENIZER_BASE | {"group_size": 5}
SMALL_MODEL = {
    "s1_bits": 10, "s2_bits": 10, "n_layers": 8, "d_model": 512, "n_heads": 8, "ff_dim": 1024,
    "ffn_dropout_p": 0.25, "attn_dropout_p": 0.1, "resid_dropout_p": 0.25,
    "token_dropout_p": 0.1, "learn_te": True,
}  # fmt: skip
MINI_MODEL = {
    "s1_bits": 10, "s2_bits": 10, "n_layers": 4, "d_model": 256, "n_heads": 4, "ff_dim": 512,
    "ffn_dropout_p": 0.2, "attn_dropout_p": 0.0, "resid_dropout_p": 0.2,
    "token_dropout_p": 0.0, "learn_te": True,
}  # fmt: skip
COLUMNS = ["open", "high", "low", "close", "volume", "amount"]
FIVE_MINUTES = Timeframe("5m")


@dataclass(frozen=True)
class Published:
    name: str
    model: dict[str, Any]
    tokenizer: dict[str, Any]
    max_context: int


SMALL = Published("small", SMALL_MODEL, TOKENIZER_BASE, 512)
MINI = Published("mini", MINI_MODEL, TOKENIZER_2K, 2048)


@dataclass(frozen=True)
class Checkpoints:
    model: Path
    tokenizer: Path


def reference() -> Any:
    """The reference package, or a skip saying why it is missing."""
    return pytest.importorskip("model", reason="the reference kronos-model-arch is not installed")


def write_random(directory: Path, published: Published, seed: int = 0) -> Checkpoints:
    """Random weights in the published format, saved by the reference classes' own
    `save_pretrained` (PyTorchModelHubMixin: config.json + model.safetensors). Norm weights and
    biases, which the reference initialises to ones and zeros, are made random too, so that a
    mix-up between them cannot pass unseen."""
    ref = reference()
    torch.manual_seed(seed)
    tokenizer = ref.KronosTokenizer(**published.tokenizer)
    model = ref.Kronos(**published.model)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for module in (tokenizer, model):
            for name, parameter in module.named_parameters():
                if name.endswith("bias"):
                    parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
                elif "norm" in name:
                    parameter.mul_(1 + 0.2 * torch.randn(parameter.shape, generator=generator))
    out = Checkpoints(directory / f"Kronos-{published.name}", directory / "tokenizer")
    model.save_pretrained(out.model)
    tokenizer.save_pretrained(out.tokenizer)
    return out


def reference_predictor(checkpoints: Checkpoints, max_context: int) -> Any:
    ref = reference()
    model = ref.Kronos.from_pretrained(checkpoints.model).eval()
    tokenizer = ref.KronosTokenizer.from_pretrained(checkpoints.tokenizer).eval()
    return ref.KronosPredictor(model, tokenizer, device="cpu", max_context=max_context)


def reference_predict(
    predictor: Any,
    frame: pd.DataFrame,
    horizon: int,
    *,
    columns: list[str] | None = None,
    **sampling: Any,
) -> np.ndarray:  # type: ignore[type-arg]
    """The reference's bars [horizon, 6] for `frame` (timestamps as bar open times, as our bars
    have them; the future ones every 5 minutes after the last)."""
    future = frame["timestamps"].iloc[-1] + pd.to_timedelta(np.arange(1, horizon + 1) * 5, "min")
    out = predictor.predict(
        frame[columns or COLUMNS],
        x_timestamp=frame["timestamps"],
        y_timestamp=pd.Series(future),
        pred_len=horizon,
        verbose=False,
        **({"T": 1.0, "top_k": 1, "top_p": 1.0, "sample_count": 1} | sampling),
    )
    return np.asarray(out[COLUMNS].to_numpy(), dtype=np.float32)


def read_bars(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, parse_dates=["timestamps"])


def bars(
    frame: pd.DataFrame, symbol: str = "600977/CNY", *, amount: bool = True, volume: bool = True
) -> list[Bar]:
    """Our bars for the frame's rows: its timestamps are the open times, in UTC. Without
    `amount` the quote volume is unknown; without `volume` the volume is zero."""
    return [
        Bar(
            symbol,
            FIVE_MINUTES,
            row.timestamps.to_pydatetime().replace(tzinfo=UTC),
            row.open,
            row.high,
            row.low,
            row.close,
            row.volume if volume else 0.0,
            row.amount if amount and volume else None,
        )
        for row in frame.itertuples()
    ]
