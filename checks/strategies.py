"""Hypothesis profiles and the search budget; each family's strategies live in its module of
:mod:`checks.claims`.

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
