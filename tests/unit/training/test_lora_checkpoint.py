"""What a checkpoint of an adapter run keeps: only the tensors that train (a 4-bit base's
quantization state would not load back into bitsandbytes' layers, and the frozen base is the
run's own), put back exactly; a checkpoint that does not fit the adapters is refused."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trader.config.finetune_settings import FinetuneSettings
from trader.training.lora import add_adapters, checkpoint_state, load_checkpoint_state


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = nn.Linear(8, 8)
        self.w1 = nn.Linear(8, 16)
        self.norm = nn.LayerNorm(8)


def adapted(seed: int) -> tuple[nn.Module, object]:
    torch.manual_seed(seed)
    block = Block()
    return block, add_adapters(block, r"(q_proj|w1)", FinetuneSettings(lora_rank=2))


def test_an_adapter_checkpoint_keeps_what_trains_and_puts_it_back():
    block, adapters = adapted(0)
    trained = {n for n, p in block.named_parameters() if p.requires_grad}
    with torch.no_grad():
        for name, parameter in block.named_parameters():
            if name in trained:
                parameter.add_(1.0)  # as if trained: LoRA's B starts at zero
    state = checkpoint_state(block, adapters)
    assert set(state) == trained
    assert all("lora_" in name for name in state)
    again, again_adapters = adapted(0)  # the same base, rebuilt
    load_checkpoint_state(again, state, again_adapters)
    for name, tensor in again.state_dict().items():
        assert torch.equal(tensor, block.state_dict()[name]), name
    without_one = dict(list(state.items())[1:])
    with pytest.raises(ValueError, match="1 trained tensors missing"):
        load_checkpoint_state(again, without_one, again_adapters)


def test_a_full_run_keeps_every_tensor():
    block = Block()
    assert set(checkpoint_state(block, None)) == set(block.state_dict())
