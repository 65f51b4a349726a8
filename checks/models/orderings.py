"""``rankwall orderings``: which orderings of k tokens a head realises as its top k, over a documented
sample, each answer certified (:mod:`rankwall.theory.orderings`).

The sample: every ordering of k tokens when there are at most :data:`ALL_LIMIT` of them (V!/(V - k)!),
else :data:`SAMPLE` orderings of k distinct tokens drawn uniformly at random (NumPy's default generator,
seeded), distinct from each other; or, with ``tokens``, every ordering of k tokens from that pool.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import permutations
from typing import Any

import numpy as np

from rankwall.theory import orderings as od
from rankwall.theory.validation import InputError, as_index_array, check_integer_in

#: Largest number of orderings decided one by one without sampling.
ALL_LIMIT = 10_000
#: Orderings drawn at random when there are more than ALL_LIMIT.
SAMPLE = 200
#: Largest k (an ordering of more tokens is rarely a question about a top-k list).
MAX_K = 16


@dataclass(frozen=True)
class Sample:
    """The orderings decided, and how they were chosen (``kind``: all, random or tokens)."""

    orderings: np.ndarray
    kind: str
    seed: int | None = None
    tokens: tuple[int, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "orderings": len(self.orderings),
            "seed": self.seed,
            "tokens": None if self.tokens is None else list(self.tokens),
        }


def orderings_count(n: int, k: int) -> int:
    """n!/(n - k)!: the orderings of k tokens out of n."""
    return math.perm(n, k)


def sample_orderings(V: int, k: int, *, count: int | None = None, seed: int = 0, tokens: Any = None) -> Sample:
    """The orderings to decide (see the module docstring); ``count`` forces a random sample of that many."""
    k = check_integer_in(k, "--k", 1, min(V, MAX_K))
    if tokens is not None:
        pool = as_index_array(tokens, "--tokens", V)
        if len(set(pool.tolist())) != len(pool):
            raise InputError(f"--tokens: a token is listed twice in {pool.tolist()}")
        if len(pool) < k:
            raise InputError(f"--tokens: {len(pool)} tokens cannot fill an ordering of --k {k}")
        if orderings_count(len(pool), k) > ALL_LIMIT:
            raise InputError(f"--tokens: {orderings_count(len(pool), k):,} orderings, more than {ALL_LIMIT:,}")
        rows = np.array(list(permutations(pool.tolist(), k)), dtype=np.int64)
        return Sample(rows, "tokens", tokens=tuple(pool.tolist()))
    total = orderings_count(V, k)
    if count is None and total <= ALL_LIMIT:
        return Sample(np.array(list(permutations(range(V), k)), dtype=np.int64), "all")
    count = check_integer_in(SAMPLE if count is None else count, "--sample", 1, min(total, 1_000_000))
    rng = np.random.default_rng(check_integer_in(seed, "--seed", 0))
    chosen: dict[tuple[int, ...], None] = {}
    while len(chosen) < count:
        chosen.setdefault(tuple(int(t) for t in rng.choice(V, size=k, replace=False)), None)
    return Sample(np.array(list(chosen), dtype=np.int64), "random", seed=seed)


@dataclass(frozen=True)
class OrderingsRun:
    """Every decision of one run, with the head and the sample they were made on."""

    head: str
    V: int
    D: int
    bias: bool
    k: int
    sample: Sample
    region: od.Region
    decisions: list[od.OrderingDecision]
    seconds: float

    @property
    def counts(self) -> dict[str, int]:
        found = Counter(d.status for d in self.decisions)
        return {status: found.get(status, 0) for status in (od.REALISABLE, od.UNREALISABLE, od.UNDECIDED)}

    def to_json(self, witnesses: bool = False) -> dict[str, Any]:
        """The record of ``rankwall orderings --json`` (docs/models.md); with ``witnesses`` each
        realisable ordering carries its h."""
        times = [d.seconds for d in self.decisions]
        return {
            "head": self.head,
            "V": self.V,
            "D": self.D,
            "bias": self.bias,
            "k": self.k,
            "region": region_json(self.region),
            "sample": self.sample.to_json(),
            "counts": self.counts,
            "methods": dict(Counter(d.method for d in self.decisions)),
            "seconds": self.seconds,
            "seconds_per_ordering": {"median": float(np.median(times)), "max": float(np.max(times))},
            "orderings": [decision_json(d, witnesses) for d in self.decisions],
        }


def region_json(region: od.Region) -> dict[str, Any] | None:
    """A region as JSON: None for all of R^D."""
    if region is None:
        return None
    if isinstance(region, od.Ball):
        return {"kind": "ball", "radius": region.radius}
    return {"kind": "box", "radii": region.radii.tolist()}


def decision_json(decision: od.OrderingDecision, witness: bool) -> dict[str, Any]:
    """One ordering's answer; an unrealisable one carries its pairs and exact weights (as strings)."""
    record: dict[str, Any] = {
        "ordering": list(decision.ordering),
        "status": decision.status,
        "method": decision.method,
        "seconds": decision.seconds,
    }
    if decision.status == od.UNREALISABLE:
        record["certificate"] = {
            "pairs": [list(pair) for pair in decision.pairs],
            "weights": [str(w) for w in decision.weights],
        }
    if witness and decision.witness is not None:
        record["witness"] = decision.witness.tolist()
    return record


def run(
    W: np.ndarray,
    bias: np.ndarray | None,
    name: str,
    sample: Sample,
    *,
    region: od.Region = None,
    on_progress: Callable[[], None] | None = None,
) -> OrderingsRun:
    """Decide every ordering of the sample for the head (W, bias), timed."""
    started = time.perf_counter()
    decisions = od.top_k_orderings(W, sample.orderings, bias, region=region, on_progress=on_progress)
    V, D = np.shape(W)
    return OrderingsRun(
        name,
        V,
        D,
        bias is not None,
        sample.orderings.shape[1],
        sample,
        region,
        decisions,
        time.perf_counter() - started,
    )
