"""Every exception rankwall raises on purpose, in one module with no third-party imports (in the manner
of Hypothesis's ``errors.py``), so that catching one costs nothing to import.

- :class:`InputError`: an argument, option, file or declaration rankwall cannot accept, with the reason
  (the command line exits 2 on it);
- :class:`OutsideDomain`: a case whose built values leave the domain its constructor guarantees, or
  the claim's hypothesis: no instance of the claim, never a counterexample;
- :class:`UndefinedStatement`: a declared side with no value on a case (a division by an exact zero);
- :class:`CannotTighten`: a factor asked of an identity, which has no bound;
- :class:`TooLarge`: a size whose largest case cannot fit the memory one case may take;
- :class:`BackendUnavailable`, :class:`ClusterUnavailable`: a backend, device, dtype or Dask cluster
  that this machine does not have (reported, not a bad input).
"""

from __future__ import annotations


class RankwallError(Exception):
    """Base of the exceptions rankwall raises on purpose."""


class InputError(RankwallError, ValueError):
    """An argument that a function of rankwall cannot accept, with the reason."""


class OutsideDomain(InputError):
    """A case whose built values leave the domain its constructor guarantees (a top atom that is not
    the largest, a tie broken by rounding), or outside the claim's hypothesis: it is no instance of the
    claim, and never a counterexample."""


class UndefinedStatement(InputError):
    """A declared side that has no value on a case (a division by a quantity that is exactly zero there,
    the square root of a negative one): the statement is undefined on its cases, which is bad input."""


class CannotTighten(InputError):
    """A factor asked of a claim that has no bound to tighten (an identity)."""


class TooLarge(InputError):
    """A size whose largest case cannot fit the memory one case may take."""


class BackendUnavailable(RankwallError, RuntimeError):
    """The requested backend, device or dtype is not available on this machine."""


class ClusterUnavailable(RankwallError, RuntimeError):
    """Dask is not installed, or the cluster cannot be reached; the message names the flag."""
