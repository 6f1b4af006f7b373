"""Kronos's BSQ tokenizer: a bar window in, two token ids (s1: coarse, s2: fine) per bar out,
and back. Encoding mirrors the reference operation for operation, so the codes agree exactly."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from trader.forecast.kronos.config import NO_DROPOUT, DropoutRates, TokenizerConfig
from trader.forecast.kronos.layers import Blocks


class KronosTokenizer(nn.Module):
    def __init__(self, config: TokenizerConfig, dropout: DropoutRates = NO_DROPOUT) -> None:
        super().__init__()
        self.config = config
        self.dropout = dropout  # the blocks' (in training mode; the published tokenizers': none)
        c = config
        self.embed = nn.Linear(c.d_in, c.d_model)
        self.head = nn.Linear(c.d_model, c.d_in)
        # The reference builds n_layers - 1 blocks on each side.
        self.encoder = Blocks(c.n_enc_layers - 1, c.d_model, c.n_heads, c.ff_dim, dropout)
        self.decoder = Blocks(c.n_dec_layers - 1, c.d_model, c.n_heads, c.ff_dim, dropout)
        self.quant_embed = nn.Linear(c.d_model, c.codebook_dim)
        self.post_quant_embed = nn.Linear(c.codebook_dim, c.d_model)

    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """Normalised bars [N, T, d_in] -> (s1, s2) ids, each [N, T] (int64)."""
        z = self.latent(x)
        # Bit j is set where the normalised coordinate is positive: exactly the reference's
        # sign quantizer (normalising first keeps its underflow-to-zero cases identical).
        bits = (F.normalize(z, dim=-1) > 0).long()
        s1 = self.config.s1_bits
        return _bits_to_ids(bits[..., :s1]), _bits_to_ids(bits[..., s1:])

    def latent(self, x: Tensor) -> Tensor:
        """Normalised bars [N, T, d_in] -> the encoder's output before quantization
        [N, T, codebook_dim]."""
        z = self.embed(x)
        cos, sin = self.encoder.rotary(_arange(z))
        for layer in self.encoder:
            z, _, _ = layer(z, cos, sin)
        return self.quant_embed(z)

    def reconstruct(self, z: Tensor) -> Tensor:
        """The decoder from position 0: embedded codes [N, T, d_model] -> bars [N, T, d_in]."""
        cos, sin = self.decoder.rotary(_arange(z))
        for layer in self.decoder:
            z, _, _ = layer(z, cos, sin)
        return self.head(z)

    def codes(self, s1: Tensor, s2: Tensor) -> Tensor:
        """The quantized vector for ids: bits as +-1, scaled to the unit sphere."""
        weights = 2 ** torch.arange(self.config.s1_bits, device=s1.device, dtype=torch.long)
        bits = torch.cat(
            [(s1.unsqueeze(-1) & weights) != 0, (s2.unsqueeze(-1) & weights) != 0], dim=-1
        )
        return (bits.float() * 2 - 1) * (1.0 / self.config.codebook_dim**0.5)

    def decode(self, s1: Tensor, s2: Tensor) -> Tensor:
        """ids [N, T] -> bars [N, T, d_in] (normalised), the window from position 0."""
        return self.reconstruct(self.post_quant_embed(self.codes(s1, s2)))

    def decode_paths(
        self, prefix: tuple[Tensor, Tensor] | None, paths: tuple[Tensor, Tensor]
    ) -> Tensor:
        """Decode windows whose first P tokens every path of a symbol shares.

        prefix: ids [B, P] (None: P = 0); paths: ids [B, S, T], the tokens after the prefix.
        Returns bars [B, S, T, d_in] for the path tokens only: the decoder is causal, so the
        prefix is run once per symbol and its keys and values serve all S paths.
        """
        z = self.post_quant_embed(self.codes(*paths))  # [B, S, T, d]
        p = 0 if prefix is None else prefix[0].shape[-1]
        positions = torch.arange(p, p + z.shape[-2], device=z.device)
        cos, sin = self.decoder.rotary(positions)
        shared = None
        if prefix is not None and p:
            shared = self.post_quant_embed(self.codes(*prefix))
            cos_p, sin_p = self.decoder.rotary(_arange(shared))
        for layer in self.decoder:
            kv = None
            if shared is not None:
                shared, k, v = layer(shared, cos_p, sin_p)
                kv = (k, v)
            z, _, _ = layer.forward_suffix(z, cos, sin, kv, None)
        return self.head(z)


def _arange(x: Tensor) -> Tensor:
    return torch.arange(x.shape[-2], device=x.device)


def _bits_to_ids(bits: Tensor) -> Tensor:
    weights = 2 ** torch.arange(bits.shape[-1], device=bits.device, dtype=torch.long)
    return (bits * weights).sum(-1)


def unused_published_tensors(config: TokenizerConfig) -> dict[str, torch.Size]:
    """Tensors the published checkpoints carry that inference never reads: the s1-only decoder
    input (training's coarse reconstruction loss) and the quantizer's index bases."""
    return {
        "post_quant_embed_pre.weight": torch.Size([config.d_model, config.s1_bits]),
        "post_quant_embed_pre.bias": torch.Size([config.d_model]),
        "tokenizer.bsq.basis": torch.Size([config.codebook_dim]),
        "tokenizer.bsq.group_basis": torch.Size([config.group_size]),
    }
