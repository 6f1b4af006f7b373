"""The settings of the forecasters: which model, on which device, and each model's own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from trader.config.section import Section

Runtime = Literal["eager", "compile"]

_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:[0-9]+)$")


class TotoSettings(Section):
    repo: str = Field("Datadog/Toto-Open-Base-1.0", description="Hugging Face repository")
    runtime: Runtime = Field(
        "eager", description="eager, or compile (opt-in; TOTO_DISABLE_COMPILE=0 also selects it)"
    )
    compile_mode: str | None = Field(None, description="torch.compile mode, e.g. reduce-overhead")
    max_recompiles: int = Field(
        2,
        ge=0,
        description="compile: recompiles after warm-up that switch the model to eager for good "
        "(logged, in the metrics); torch itself gives up at its recompile_limit (8)",
    )
    num_samples: int = Field(256, ge=1, le=8192, description="sample paths per forecast")
    variates: list[Literal["close", "high", "low", "open", "volume"]] = Field(
        ["close", "high", "low"], min_length=1, description="bar fields forecast together"
    )


class KronosSettings(Section):
    repo: str = Field("NeoQuasar/Kronos-small", description="Hugging Face repository")
    tokenizer_repo: str = Field(
        "NeoQuasar/Kronos-Tokenizer-base", description="Hugging Face repository of the tokenizer"
    )
    runtime: Runtime = Field(
        "eager",
        description="eager; compile is refused (its KV-cached generation recompiles as the "
        "cache grows: `trader bench compile --model kronos` measures it)",
    )
    compile_mode: str | None = Field(
        None, description="torch.compile mode for `trader bench compile --model kronos`"
    )
    max_context: int = Field(512, ge=16, le=4096, description="bars the model sees at most")
    sample_count: int = Field(16, ge=1, le=1024, description="sample paths per forecast")
    temperature: float = Field(1.0, gt=0, description="sampling temperature")
    top_k: int = Field(0, ge=0, description="keep the k likeliest tokens (0: off; overrides top_p)")
    top_p: float = Field(0.9, gt=0, le=1, description="nucleus sampling mass")


class ForecastSettings(Section):
    model: Literal["toto", "kronos", "baseline"] = Field("toto", description="forecaster")
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N (cuda never falls back)")
    precision: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Toto's autocast: auto is float32 on CPU, bfloat16 on GPUs with native "
        "bfloat16, else float16 (Kronos runs float32)",
    )
    horizon: int = Field(1, ge=1, le=1024, description="bars ahead to forecast")
    seed: int = Field(0, ge=0, description="random seed of the sampler")
    quantiles: list[float] = Field(
        [0.1, 0.2, 0.4, 0.5, 0.6, 0.8, 0.9], min_length=1, description="quantile levels reported"
    )
    baseline_lookback: int = Field(
        256, ge=8, description="bars of history behind the baseline's quantiles"
    )
    weights_dir: Path | None = Field(
        None,
        description="local directory of weights (a folder per repository), or the weights/ "
        "folder of a `trader finetune` run; default: the Hugging Face cache",
    )
    hf_token: SecretStr | None = Field(None, description="Hugging Face token, if a repo needs it")
    download: bool = Field(
        True, description="fetch missing weights from the Hugging Face hub (false: cache only)"
    )
    toto: TotoSettings = TotoSettings()
    kronos: KronosSettings = KronosSettings()

    @field_validator("device")
    @classmethod
    def _device(cls, device: str) -> str:
        if not _DEVICE.match(device):
            raise ValueError(f"{device!r} is not auto, cpu, cuda or cuda:N")
        return device

    @field_validator("quantiles")
    @classmethod
    def _quantiles(cls, levels: list[float]) -> list[float]:
        if any(not 0 < q < 1 for q in levels):
            raise ValueError("quantile levels lie strictly between 0 and 1")
        return sorted(set(levels))
