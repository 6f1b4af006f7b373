"""Aster's v3 request signature, checked as Aster's futures API v3 defines it and as ccxt's
`aster.sign` (4.5.90) produces it: the request's parameters (with `nonce` in microseconds,
`user` and `signer` addresses) as one query string, signed as the EIP-712 typed message
{msg: <that string>} under the domain {name "AsterSignTransaction", version "1", chainId 1666,
verifyingContract 0x0}; `signature` is the 65-byte r || s || v (v = 27 + recovery id).

The signer is recovered from the signature (secp256k1, coincurve, which ccxt depends on) and
must be the request's `signer`; the EIP-712 encoding is ccxt's own (its static `ethabi`),
so this proves the emulator and ccxt agree, not that either agrees with Aster's servers.
"""

from __future__ import annotations

import coincurve
from ccxt.base.exchange import Exchange

DOMAIN = {
    "name": "AsterSignTransaction",
    "version": "1",
    "chainId": 1666,
    "verifyingContract": "0x0000000000000000000000000000000000000000",
}
MESSAGE_TYPES = {"Message": [{"name": "msg", "type": "string"}]}


def _keccak(data: bytes) -> bytes:
    digest: bytes = Exchange.hash(data, "keccak", "binary")
    return digest


def recover_signer(payload: str, signature: str) -> str | None:
    """The address that signed `payload` (lower case), or None for a malformed signature."""
    try:
        raw = bytes.fromhex(signature.removeprefix("0x"))
    except ValueError:
        return None
    if len(raw) != 65 or raw[64] not in (27, 28):
        return None
    encoded = Exchange.eth_encode_structured_data(DOMAIN, MESSAGE_TYPES, {"msg": payload})
    digest = _keccak(encoded)
    try:
        public = coincurve.PublicKey.from_signature_and_message(
            raw[:64] + bytes([raw[64] - 27]), digest, hasher=None
        )
    except ValueError:
        return None
    return "0x" + _keccak(public.format(compressed=False)[1:])[-20:].hex()
