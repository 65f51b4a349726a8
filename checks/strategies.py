"""Hypothesis strategies and profiles: every strategy of every family lives here.

Strategies draw *parameters* (sizes, top masses, logit gaps, concentrations, seeds) and
return :class:`~checks.verdict.Instance` objects that the theory constructors build; they
never draw array entries one by one. The profiles are ``ci`` (selected under ``CI=true``:
derandomised, no example database), ``dev`` (the default elsewhere) and ``deep`` (tens of
thousands of examples, for long runs or a GPU).
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from checks.verdict import Instance

_QUIET = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=60,
    deadline=None,
    suppress_health_check=_QUIET,
    print_blob=True,
)
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=_QUIET)
settings.register_profile("deep", max_examples=20_000, deadline=None, suppress_health_check=_QUIET)

#: Examples a ``rankwall search`` runs by default: the budget within which CI must refute
#: every planted mutant.
CI_SEARCH_BUDGET = 300


def load_profile() -> str:
    """Load ``$HYPOTHESIS_PROFILE``, else ``ci`` under ``CI=true``, else ``dev``; return its name."""
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
    settings.load_profile(name)
    return name


# ----------------------------------------------------------------- softmax-jacobian rows

BIG_VOCABULARIES = (1024, 8192, 32768, 131072)


def vocabularies(low: int = 2) -> st.SearchStrategy[int]:
    """V from ``low`` to 131,072, mostly small (fast to escalate), sometimes huge."""
    return st.one_of(
        st.integers(low, 16),
        st.integers(low, 600),
        st.sampled_from([v for v in BIG_VOCABULARIES if v >= low]),
    )


def top_masses(low: float, high: float) -> st.SearchStrategy[float]:
    """m in [low, high], with the ends, 1/2 and values a few ulps from 1 drawn often."""
    specials = [x for x in (0.5, 0.9, 0.99, 1 - 1e-6, 1 - 1e-12, 1 - 2**-52, 1.0) if low <= x <= high]
    return st.one_of(
        st.floats(low, high, allow_nan=False),
        st.sampled_from(specials or [high]),
        st.just(low),
    )


@st.composite
def runner_up_instances(draw: Any, exact_witness: bool = False) -> Instance:
    V = draw(vocabularies())
    m = draw(top_masses(0.5, 1.0))
    tail = 0.0 if exact_witness or V < 3 else draw(st.one_of(st.just(0.0), st.floats(0, 1 - m)))
    return Instance("runner-up", {"V": V, "m": m, "tail_mass": min(tail, 1 - m)})


@st.composite
def tied_instances(draw: Any) -> Instance:
    V = draw(vocabularies())
    m = draw(top_masses(max(1.0 / V, 1e-9), 0.5))
    if V == 2:
        m = 0.5
    return Instance("tied-atoms", {"V": V, "m": m})


@st.composite
def spread_instances(draw: Any, low_vocabulary: int = 2) -> Instance:
    V = draw(vocabularies(low_vocabulary))
    return Instance("spread-tail", {"V": V, "m": draw(top_masses(1.0 / V, 1.0))})


@st.composite
def dirichlet_instances(draw: Any) -> Instance:
    V = draw(vocabularies())
    alpha = 10 ** draw(st.floats(-3, 3))
    return Instance("dirichlet", {"V": V, "concentration": alpha, "seed": draw(st.integers(0, 2**16))})


@st.composite
def sparse_instances(draw: Any) -> Instance:
    V = draw(vocabularies())
    support = draw(st.integers(1, V))
    return Instance("sparse", {"V": V, "support": support, "seed": draw(st.integers(0, 2**16))})


@st.composite
def logit_instances(draw: Any) -> Instance:
    V = draw(vocabularies())
    gap = draw(st.one_of(st.floats(0, 50), st.floats(50, 800), st.sampled_from([0.0, 700.0, 745.0, 800.0])))
    offset = draw(st.sampled_from([0.0, 1e3, -1e6, 1e8]))
    runners = draw(st.integers(1, V - 1))
    tail_gap = draw(st.floats(0, 50))
    return Instance("logits", {"V": V, "gap": gap, "offset": offset, "runners": runners, "tail_gap": tail_gap})


def any_row() -> st.SearchStrategy[Instance]:
    """Every family: runner-ups, ties, spread tails, uniform, Dirichlet, sparse, logit gaps."""
    return st.one_of(
        runner_up_instances(),
        tied_instances(),
        spread_instances(),
        vocabularies().map(lambda V: Instance("uniform", {"V": V})),
        dirichlet_instances(),
        sparse_instances(),
        logit_instances(),
    )


@st.composite
def with_direction(draw: Any, rows: st.SearchStrategy[Instance]) -> Instance:
    instance = draw(rows)
    params = dict(instance.params)
    params["direction_seed"] = draw(st.integers(0, 2**16))
    params["direction_scale"] = draw(st.sampled_from([1.0, 1e-6, 1e6]))
    params["direction_offset"] = draw(st.sampled_from([0.0, 1.0, 1e4, -1e8]))
    return Instance(instance.family, params)


# ----------------------------------------------------------------- error-rank and logprob-rank


@st.composite
def unique_continuation_instances(draw: Any, k_equals_V: bool = False) -> Instance:
    """k contexts with distinct unique continuations, logits of rank D, scales up to 1000
    (large scales underflow float64 softmax rows)."""
    V = draw(st.one_of(st.integers(2, 40), st.integers(2, 600), st.sampled_from([4096, 131072])))
    k = V if k_equals_V else draw(st.integers(1, min(V, 256)))
    if k_equals_V and V > 600:
        V = k = draw(st.integers(2, 600))
    return Instance(
        "unique-continuation",
        {
            "V": V,
            "k": k,
            "D": draw(st.integers(1, 32)),
            "seed": draw(st.integers(0, 2**16)),
            "scale": draw(st.sampled_from([0.1, 1.0, 10.0, 100.0, 1000.0])),
        },
    )


@st.composite
def corpus_instances(draw: Any) -> Instance:
    """Unique continuations of n-gram contexts in tinyshakespeare (character level)."""
    return Instance(
        "corpus",
        {
            "corpus": "tinyshakespeare.txt",
            "level": "char",
            "order": draw(st.integers(1, 4)),
            "D": draw(st.integers(1, 16)),
            "seed": draw(st.integers(0, 2**16)),
            "scale": draw(st.sampled_from([0.5, 5.0])),
        },
    )


@st.composite
def stochastic_instances(draw: Any) -> Instance:
    n = draw(st.integers(1, 40))
    return Instance(
        "stochastic",
        {
            "n": n,
            "closed": draw(st.integers(1, n)),
            "seed": draw(st.integers(0, 2**16)),
            "density": draw(st.floats(0, 0.6)),
        },
    )


@st.composite
def wcdd_instances(draw: Any) -> Instance:
    n = draw(st.integers(1, 40))
    return Instance(
        "wcdd",
        {
            "n": n,
            "leaks": draw(st.integers(1, n)),
            "seed": draw(st.integers(0, 2**16)),
            "density": draw(st.floats(0, 0.5)),
        },
    )


@st.composite
def batch_instances(draw: Any) -> Instance:
    V = draw(st.integers(8, 400))
    contexts = draw(st.integers(20, 300))
    return Instance(
        "batch",
        {
            "V": V,
            "contexts": contexts,
            "seed": draw(st.integers(0, 2**16)),
            "unique_share": draw(st.floats(0, 0.6)),
            "batch_tokens": draw(st.integers(10, 2 * contexts)),
            "delta": draw(st.sampled_from([1e-2, 1e-4, 1e-8])),
        },
    )


@st.composite
def low_rank_instances(draw: Any, factors: bool = False) -> Instance:
    rows = draw(st.integers(1, 40))
    columns = draw(st.integers(2, 60))
    rank = draw(st.integers(0 if not factors else 1, min(rows, columns)))
    if factors:
        scale = draw(st.sampled_from([0.1, 1.0, 30.0]))
        return Instance(
            "factors",
            {
                "rows": rows,
                "columns": columns,
                "rank": rank,
                "seed": draw(st.integers(0, 2**16)),
                "scale": scale,
            },
        )
    return Instance(
        "low-rank",
        {
            "rows": rows,
            "columns": columns,
            "rank": rank,
            "seed": draw(st.integers(0, 2**16)),
            "spread": draw(st.integers(1, 5)),
            "scale": draw(st.sampled_from([1, 3, 50])),
        },
    )


@st.composite
def row_shift_instances(draw: Any) -> Instance:
    rows = draw(st.integers(1, 30))
    columns = draw(st.integers(2, 40))
    return Instance(
        "row-shift",
        {
            "rows": rows,
            "columns": columns,
            "rank": draw(st.integers(0, min(rows, columns))),
            "seed": draw(st.integers(0, 2**16)),
            "spread": draw(st.integers(1, 4)),
            "shift_seed": draw(st.integers(0, 2**16)),
            "shift_spread": draw(st.integers(0, 6)),
            "second": draw(st.integers(0, 1)),
        },
    )


# ----------------------------------------------------------------- updates


@st.composite
def step_instances(draw: Any, delta: str) -> Instance:
    """A gradient step (H, W, G, eta = p/q), integer or Gaussian, and which rank-2D update to use."""
    V = draw(st.integers(2, 48))
    kinds = ("first-order", "exact-step", "random-rank", "truncated-svd")
    return Instance(
        "step",
        {
            "contexts": draw(st.integers(1, 40)),
            "V": V,
            "D": draw(st.integers(1, max(1, min(V, 12)))),
            "seed": draw(st.integers(0, 2**16)),
            "integers": draw(st.booleans()),
            "eta_num": draw(st.integers(1, 5)),
            "eta_den": draw(st.integers(1, 7)),
            "delta": draw(st.sampled_from(kinds)) if delta == "any" else delta,
        },
    )


# ----------------------------------------------------------------- compression


@st.composite
def compression_instances(draw: Any, aligned: bool = False) -> Instance:
    """A batch gradient through a random or low-rank head (or one aligned with the gradient)."""
    V = draw(st.integers(2, 600))
    D = draw(st.integers(1, min(V, 64)))
    low = draw(st.booleans())
    return Instance(
        "batch-gradient",
        {
            "V": V,
            "D": D,
            "rank": draw(st.integers(1, D)) if low else None,
            "tokens": draw(st.integers(1, 64)),
            "seed": draw(st.integers(0, 2**16)),
            "scale": draw(st.sampled_from([0.1, 1.0, 10.0])),
            "aligned": aligned,
        },
    )


# ----------------------------------------------------------------- heads


@st.composite
def head_instances(draw: Any, heads: tuple[str, ...], K_min: int = 1, scale_min: float = 0.3) -> Instance:
    """A head, its sizes (N contexts, V tokens, hidden size d, K latents) and logit scale."""
    d = draw(st.integers(1, 10))
    return Instance(
        "head",
        {
            "head": draw(st.sampled_from(heads)),
            "N": draw(st.integers(d + 2, 80)),
            "V": draw(st.integers(d + 2, 150)),
            "d": d,
            "K": draw(st.integers(K_min, 8)),
            "seed": draw(st.integers(0, 2**16)),
            "scale": draw(st.sampled_from([s for s in (0.3, 1.0, 3.0, 10.0) if s >= scale_min])),
        },
    )


# ----------------------------------------------------------------- expressivity


@st.composite
def expressivity_instances(draw: Any, tangent: bool = False) -> Instance:
    """Circle witnesses (V up to 8,192 here; the witnesses go to 131,072) or D = 1 tangent heads."""
    if tangent:
        return Instance("tangent", {"V": draw(st.integers(2, 2000)), "seed": draw(st.integers(0, 2**16))})
    return Instance(
        "top1",
        {
            "V": draw(st.one_of(st.integers(2, 64), st.sampled_from([1024, 8192]))),
            "D": draw(st.integers(2, 16)),
            "contexts": draw(st.integers(1, 8)),
            "seed": draw(st.integers(0, 2**16)),
            "eps": draw(st.sampled_from([1e-3, 1e-6])),
        },
    )


@st.composite
def gibbs_instances(draw: Any) -> Instance:
    return Instance(
        "gibbs",
        {
            "V": draw(st.integers(2, 200)),
            "contexts": draw(st.integers(1, 60)),
            "seed": draw(st.integers(0, 2**16)),
            "scale": draw(st.sampled_from([0.1, 1.0, 10.0])),
            "exact_fit": draw(st.booleans()),
        },
    )


@st.composite
def argmax_instances(draw: Any) -> Instance:
    """Heads without bias for the argmaxable-token checks (small D, so qhull can cross-check)."""
    D = draw(st.integers(2, 5))
    return Instance(
        "argmax-head",
        {
            "V": draw(st.integers(D + 2, 120)),
            "D": D,
            "seed": draw(st.integers(0, 2**16)),
            "interior": draw(st.integers(0, 4)),
        },
    )
