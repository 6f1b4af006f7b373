"""The settings of `trader finetune`: the optimisation, the windows, the split, what is trained
and how the result is judged."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from trader.config.section import Section


class FinetuneSettings(Section):
    learning_rate: float = Field(1e-4, gt=0, le=1, description="peak learning rate (AdamW)")
    min_learning_rate: float = Field(
        1e-5, ge=0, le=1, description="learning rate at the end of the cosine schedule"
    )
    schedule: Literal["cosine", "constant"] = Field(
        "cosine",
        description="learning rate after warm-up: cosine decay to min_learning_rate, or constant",
    )
    warmup_steps: int = Field(10, ge=0, description="linear warm-up from min_learning_rate")
    batch_size: int = Field(
        16,
        ge=1,
        le=65536,
        description="windows per optimizer step, across all processes: the same whatever the "
        "number of processes (it must divide by it)",
    )
    context: int = Field(
        256, ge=16, le=4096, description="bars of context per window (Toto: whole patches)"
    )
    horizon: int = Field(
        16,
        ge=1,
        le=1024,
        description="bars ahead: Kronos's windows hold context + horizon bars, every split gap "
        "is at least this long, and the evaluation forecasts this far",
    )
    grad_clip: float = Field(1.0, ge=0, description="gradient norm clip (0: off)")
    weight_decay: float = Field(0.01, ge=0, le=1, description="AdamW weight decay")
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="autocast: auto is bfloat16 on GPUs with native bfloat16, else float32 "
        "(the CPU always trains in float32)",
    )
    max_steps: int = Field(
        1000, ge=1, description="optimizer steps (--max-steps; --epochs N sets it instead)"
    )
    log_interval: int = Field(10, ge=1, description="steps between training log lines")
    validation_interval: int = Field(
        50, ge=1, description="steps between validations (and one at the end)"
    )
    validation_windows: int = Field(
        128, ge=1, description="validation windows scored each time (spread over the split)"
    )
    checkpoint_interval: int = Field(
        100, ge=1, description="steps between checkpoints (and one at the end)"
    )
    patience: int = Field(
        5,
        ge=0,
        description="validations without a new best before training stops early (0: never)",
    )
    seed: int = Field(
        0, ge=0, description="seed of the initialisation, sampling, order and dropout masks"
    )
    dropout: bool = Field(
        True,
        description="the dropout the model authors train with, at the rates in the base's "
        "config (false: none, e.g. to compare process counts step for step)",
    )
    validation_fraction: float = Field(
        0.1, gt=0, lt=0.5, description="share of the bar times that form the validation split"
    )
    test_fraction: float = Field(
        0.1,
        gt=0,
        lt=0.5,
        description="share of the bar times held out at the end: never trained or stopped on, "
        "scored once at the end",
    )
    gap_bars: int = Field(
        0,
        ge=0,
        description="bars purged between train and validation and between validation and "
        "test; at least the horizon (and Toto's patch) whatever is set",
    )
    kronos_train: Literal["predictor", "tokenizer", "both"] = Field(
        "predictor",
        description="Kronos: the predictor (cross-entropy on the s1 then s2 tokens, tokenizer "
        "frozen), the tokenizer (reconstruction + BSQ losses, predictor untouched), or both "
        "(the two losses in one step; the reference's order, tokenizer then predictor, is two "
        "runs, the second from the first's weights)",
    )
    toto_train: Literal["all", "head"] = Field(
        "all",
        description="Toto: every weight, or only the output head (unembedding and the Student-T "
        "mixture)",
    )
    toto_nll_weight: float = Field(
        0.575,
        ge=0,
        le=1,
        description="Toto: weight of the mixture's negative log-likelihood in the loss, the "
        "rest on the robust loss of its mean (Datadog's fine-tuning loss: 0.575; 1: NLL only)",
    )
    lora_rank: int = Field(8, ge=1, le=1024, description="--lora: rank of the adapters")
    lora_alpha: int = Field(
        16, ge=1, description="--lora: the adapters' scale is lora_alpha / lora_rank"
    )
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="--lora: dropout on the adapters")
    evaluation_windows: int = Field(
        64, ge=1, description="forecast origins scored on the held-out test tail"
    )
    evaluation_samples: int = Field(
        64, ge=1, le=8192, description="sample paths per forecast in the evaluation"
    )

    @model_validator(mode="after")
    def _rates(self) -> FinetuneSettings:
        if self.min_learning_rate > self.learning_rate:
            raise ValueError("min_learning_rate is above learning_rate")
        if self.validation_fraction + self.test_fraction >= 0.8:
            raise ValueError("validation_fraction + test_fraction leave too little to train on")
        if self.context < self.horizon + 8:
            # The evaluation's naive reference (the baseline's quantiles of past k-bar moves)
            # needs the horizon and 8 more bars of context: refused now, not after training.
            raise ValueError(
                f"context ({self.context}) must hold the horizon ({self.horizon}) and 8 more "
                "bars: the evaluation's naive reference is made from the past moves in it"
            )
        return self
