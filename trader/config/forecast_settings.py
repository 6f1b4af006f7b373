"""The settings of the forecasters: which model, on which device, and each model's own."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from trader.config.section import Section

Runtime = Literal["eager", "compile"]

_DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:[0-9]+)$")

# Evenly spaced and symmetric: the quantile CRPS is then a fair approximation, and the 50/80/90%
# central intervals whose coverage is scored are all there.
DEFAULT_LEVELS = tuple(round(0.05 * i, 2) for i in range(1, 20))
# The levels a model can forecast at all, where it cannot forecast every one: Toto 2.0's head
# predicts the deciles 0.1 .. 0.9 and nothing beyond them (no tail is made up).
LEVEL_RANGES: dict[str, tuple[float, float]] = {"toto2": (0.1, 0.9)}


def default_levels(models: Iterable[str]) -> list[float]:
    """The default levels that every one of `models` can forecast."""
    ranges = [LEVEL_RANGES[m] for m in models if m in LEVEL_RANGES]
    low = max((r[0] for r in ranges), default=0.0)
    high = min((r[1] for r in ranges), default=1.0)
    return [q for q in DEFAULT_LEVELS if low - 1e-9 <= q <= high + 1e-9]


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


class Toto2Settings(Section):
    model: str = Field(
        "22m",
        description="Toto 2.0 size (4m, 22m, 313m, 1B, 2.5B, 2.5B-FT: its Datadog repository), "
        "a Hugging Face repository or a checkpoint directory",
    )
    context: int = Field(
        4096, ge=32, le=65536, description="bars of context the model sees at most (the latest)"
    )
    decode_block: int = Field(
        0,
        ge=0,
        description="steps predicted per pass, a multiple of the patch (32); longer horizons "
        "go on block by block from the median; 0: the whole horizon in one pass",
    )
    precision: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="autocast of the forward pass: auto follows forecast.precision"
    )
    runtime: Runtime = Field("eager", description="eager, or compile (opt-in)")
    compile_mode: str | None = Field(None, description="torch.compile mode, e.g. reduce-overhead")
    max_recompiles: int = Field(
        2,
        ge=0,
        description="compile: recompiles after warm-up that switch the model to eager for good",
    )
    variates: list[Literal["close", "high", "low", "open", "volume"]] = Field(
        ["close", "high", "low"], min_length=1, description="bar fields forecast together"
    )


class ForecastSettings(Section):
    model: Literal["toto", "toto2", "kronos", "baseline"] = Field("toto", description="forecaster")
    device: str = Field("auto", description="auto, cpu, cuda or cuda:N (cuda never falls back)")
    precision: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto",
        description="Toto's autocast: auto is float32 on CPU, bfloat16 on GPUs with native "
        "bfloat16, else float16 (Kronos runs float32)",
    )
    horizon: int = Field(1, ge=1, le=1024, description="bars ahead to forecast")
    seed: int = Field(0, ge=0, description="random seed of the sampler")
    quantiles: list[float] = Field(
        list(DEFAULT_LEVELS),
        min_length=1,
        description="quantile levels reported (0.05 .. 0.95: the skill metrics score the "
        "50/80/90% central intervals and the CRPS from them; toto2: 0.1 .. 0.9, all it forecasts)",
    )
    baseline_lookback: int = Field(
        256, ge=8, description="bars of history behind the baseline's quantiles"
    )
    naive_window: int = Field(
        256,
        ge=8,
        description="skill's naive reference: the random walk with the empirical quantiles of "
        "the moves over this many bars (and the horizon) before each origin, the baseline's "
        "construction (so the baseline at the same lookback scores 0)",
    )
    skill_window: int = Field(
        168,
        ge=1,
        description="live skill: the latest scored forecasts per model and symbol that "
        "trader_forecast_crps, _mase, _coverage and _skill_vs_naive are computed over",
    )
    stability_jump_sigmas: float = Field(
        4.0,
        gt=0,
        description="a tick-to-tick move of the median forecast beyond this many realised "
        "sigmas over the horizon counts in trader_forecast_median_jumps_total",
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
    toto2: Toto2Settings = Toto2Settings()
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

    @model_validator(mode="before")
    @classmethod
    def _model_levels(cls, data: Any) -> Any:
        # A model that forecasts fewer levels gets the default levels it can forecast, unless
        # the levels were given (then they are checked below).
        if isinstance(data, dict) and data.get("model") in LEVEL_RANGES and "quantiles" not in data:
            return {**data, "quantiles": default_levels([data["model"]])}
        return data

    def with_model(self, model: str) -> ForecastSettings:
        """These settings for `model`, checked again: with its default levels, unless levels
        were given."""
        data = self.model_dump()
        data["model"] = model
        if "quantiles" not in self.model_fields_set:
            data["quantiles"] = default_levels([model])
        return type(self).model_validate(data)

    @model_validator(mode="after")
    def _levels_the_model_forecasts(self) -> ForecastSettings:
        if self.model in LEVEL_RANGES:
            low, high = LEVEL_RANGES[self.model]
            beyond = [q for q in self.quantiles if not low - 1e-9 <= q <= high + 1e-9]
            if beyond:
                raise ValueError(
                    f"quantiles {beyond}: {self.model} forecasts the levels {low} to {high} only"
                )
        return self
