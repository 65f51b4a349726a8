"""Hypothesis profiles and the search budget; each family's strategies live in its module of
:mod:`rankwall.checks.claims`.

Strategies draw *parameters* (sizes, top masses, logit gaps, concentrations, seeds) and
return :class:`~rankwall.checks.engine.verdict.Instance` objects that the theory constructors build; they
never draw array entries one by one. The profiles are ``ci`` (selected under ``CI=true``:
derandomised, no example database), ``dev`` (the default elsewhere) and ``deep`` (tens of
thousands of examples, for long runs or a GPU).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: Health checks a search does not need: slow instances, rejected draws and large draws are expected.
QUIET_HEALTH_CHECKS = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    max_examples=60,
    deadline=None,
    suppress_health_check=QUIET_HEALTH_CHECKS,
    print_blob=True,
)
settings.register_profile("dev", max_examples=100, deadline=None, suppress_health_check=QUIET_HEALTH_CHECKS)
settings.register_profile("deep", max_examples=20_000, deadline=None, suppress_health_check=QUIET_HEALTH_CHECKS)

#: Examples a ``rankwall search`` runs by default: the budget within which CI must refute
#: every planted mutant.
CI_SEARCH_BUDGET = 300


def load_profile() -> str:
    """Load ``$HYPOTHESIS_PROFILE``, else ``ci`` under ``CI=true``, else ``dev``; return its name."""
    name = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
    settings.load_profile(name)
    return name
