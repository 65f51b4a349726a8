"""rankwall: the mathematics of the softmax / LM-head bottleneck as claims that can be built,
checked with a certified margin, and searched for counterexamples.

The distribution installs three packages: this one, :mod:`rankwall.theory` (the mathematics,
from the top-level folder ``theory/``) and :mod:`rankwall.checks` (verdicts, certificates,
search, models and the command line, from ``checks/``).
"""

from rankwall.theory.validation import InputError

__all__ = ["InputError"]
