"""The argmax question of a head, as a library: which tokens no hidden state can make the strict
argmax of W h + b (:func:`summarize`, deciding every token through
:func:`rankwall.theory.expressivity.argmaxable`), their exact never-certificates, and each token's
string shown escaped. ``rankwall argmax`` parses, calls :func:`summarize` and prints."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ArgmaxSummary:
    """The answer for a head: the never-argmax and undecided token ids, how each token was decided."""

    head: str
    V: int
    D: int
    bias: bool
    never: list[int]
    undecided: list[int]
    methods: dict[str, int]
    seconds: float
    #: The region of --bound / --box (``kind``, ``radius`` or ``radii``, ``from``), None for all of R^D.
    region: dict[str, Any] | None = None
    #: Tokens that win for some h, but for none within the region.
    never_within_the_bound_only: list[int] = field(default_factory=list)
    #: Per never token, its exact certificate (:func:`never_certificates`).
    never_certificates: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: A winning h per token (V x D float64, NaN rows where the token is not argmaxable).
    winning_h: Any = None
    #: Per never token, its string escaped (:func:`escaped_text`); None where the head has no tokenizer.
    never_strings: dict[int, str] | None = None
    #: Where the strings come from (the tokenizer's file and encoding); None without a tokenizer.
    tokenizer: str | None = None

    @property
    def argmaxable(self) -> int:
        return self.V - len(self.never) - len(self.undecided)

    def to_json(self) -> dict[str, Any]:
        return {
            "head": self.head,
            "V": self.V,
            "D": self.D,
            "bias": self.bias,
            "argmaxable": self.argmaxable,
            "unargmaxable": self.never,
            "undecided": self.undecided,
            "methods": self.methods,
            "seconds": round(self.seconds, 3),
            "never_certificates": {str(token): c for token, c in sorted(self.never_certificates.items())},
            "never_strings": None
            if self.never_strings is None
            else {str(token): text for token, text in sorted(self.never_strings.items())},
            "tokenizer": self.tokenizer,
        } | (
            {}
            if self.region is None
            else {"region": self.region, "never_within_the_bound_only": self.never_within_the_bound_only}
        )


def summarize(
    W: Any, b: Any, name: str, on_progress: Any = None, region: Any = None, region_record: dict[str, Any] | None = None
) -> ArgmaxSummary:
    """Decide every token of the head (:func:`rankwall.theory.expressivity.argmaxable`, or
    :func:`~rankwall.theory.expressivity.bounded_argmaxable` within ``region``) and summarize."""
    from rankwall.theory import expressivity as ex

    started = time.perf_counter()
    if region is None:
        result = ex.argmaxable(W, b, on_progress=on_progress)
    else:
        result = ex.bounded_argmaxable(W, b, region=region, on_progress=on_progress)
    return ArgmaxSummary(
        head=name,
        V=int(np.shape(W)[0]),
        D=int(np.shape(W)[1]),
        bias=b is not None,
        never=np.flatnonzero(result["never"]).tolist(),
        undecided=np.flatnonzero(~result["argmaxable"] & ~result["never"]).tolist(),
        methods=dict(Counter(str(m) for m in result["method"])),
        seconds=time.perf_counter() - started,
        region=region_record,
        never_within_the_bound_only=sorted(int(i) for i in result["bounded"]) if region is not None else [],
        never_certificates=never_certificates(result),
        winning_h=result["witness"],
    )


def never_certificates(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """The never-tokens' certificates of an :func:`~rankwall.theory.expressivity.argmaxable` answer,
    exact: convex weights λ ("p/q") over ``rows`` with Σ λ_j w_j = w_i and Σ λ_j b_j >= b_i; within a
    region, weights over the ``pairs`` (i, j) with σ(Σ λ_r (w_i − w_j)) + Σ λ_r (b_i − b_j) <= 0, σ the
    region's support function."""
    found: dict[int, dict[str, Any]] = {}
    for token, (rows, weights) in result["combination"].items():
        found[int(token)] = {
            "kind": "convex combination",
            "rows": [int(r) for r in rows],
            "weights": [str(w) for w in weights],
            "condition": "sum_j weights_j W[rows_j] == W[token], sum weights == 1, weights >= 0, "
            "sum_j weights_j b[rows_j] >= b[token]",
        }
    for token, (pairs, weights) in result.get("bounded", {}).items():
        found[int(token)] = {
            "kind": "within the region",
            "pairs": [[int(p), int(q)] for p, q in pairs],
            "weights": [str(w) for w in weights],
            "condition": "support(sum_r weights_r (W[p_r] - W[q_r])) + sum_r weights_r (b[p_r] - b[q_r]) <= 0, "
            "weights >= 0, sum weights == 1",
        }
    return found


def escaped_text(data: bytes) -> str:
    """``data`` as UTF-8 text in which every character shows, in Python's escapes: a backslash, a
    double quote, a newline, a tab and a carriage return as ``\\\\``, ``\\"``, ``\\n``, ``\\t``, ``\\r``;
    a byte that is not UTF-8 (a piece of a longer character, 0x80 to 0xff) as ``\\xNN``; any other
    character that does not print as ``\\xNN`` below 0x80 (ASCII controls), else ``\\uNNNN`` or
    ``\\UNNNNNNNN`` (a non-breaking space, a format character). So ``\\xNN`` with NN >= 80 is always a
    raw byte, and the bytes can be read back from the text."""
    shown = []
    for character in data.decode("utf-8", "surrogateescape"):
        code = ord(character)
        if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for the byte code - 0xDC00
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif character in _ESCAPES:
            shown.append(_ESCAPES[character])
        elif character.isprintable():
            shown.append(character)
        elif code < 0x80:
            shown.append(f"\\x{code:02x}")
        else:  # never \\xNN, which stands for a byte that is not UTF-8
            shown.append(f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(shown)


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def token_strings(vocabulary: Any, tokens: list[int]) -> dict[int, str]:
    """Each token's string, escaped (:func:`escaped_text`); a token the vocabulary has no entry for is
    left out."""
    found = {token: vocabulary.bytes_of(token) for token in tokens}
    return {token: escaped_text(data) for token, data in found.items() if data is not None}
