"""Defaults that make sense from a random base, decided before anything is read.

Kronos from `--base random:small` trains its tokenizer too: the predictor learns to predict the
tokenizer's codes, and a random tokenizer's codes carry little of the prices while its random
decoder turns them back into meaningless ones. Trained alone on them, the predictor fits those
codes (a run from random:small cut its validation loss five-fold) while its test CRPS got worse.
So the default (`kronos_train = predictor`) becomes `both`, said in the first lines; asking for
the predictor alone by name is refused with the reason.
"""

from __future__ import annotations

from trader.config.schema import Settings
from trader.training.base import RANDOM_SMALL
from trader.training.request import FinetuneRequest


class SettingsRefused(Exception):
    """Settings this run cannot train with; the message says which and why."""


WHY = (
    "a random tokenizer's codes carry little of the prices and its random decoder turns "
    "them back into meaningless ones, so a predictor trained alone on them fits noise"
)


def random_base_defaults(
    settings: Settings, request: FinetuneRequest
) -> tuple[Settings, tuple[str, ...]]:
    """The settings this run trains with, and a line for each default changed."""
    finetune = settings.finetune
    if request.model != "kronos" or request.base != RANDOM_SMALL:
        return settings, ()
    if finetune.kronos_train != "predictor":
        return settings, ()
    if "kronos_train" in finetune.model_fields_set:
        raise SettingsRefused(
            f"finetune.kronos_train = predictor from a random base is refused: {WHY}; train "
            "the tokenizer too (kronos_train = both) or start from published weights"
        )
    changed = settings.model_copy(
        update={"finetune": finetune.model_copy(update={"kronos_train": "both"})}
    )
    note = (
        "kronos from a random base: training the tokenizer too (finetune.kronos_train = both, "
        f"not the default predictor alone): {WHY}"
    )
    return changed, (note,)
