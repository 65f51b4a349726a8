"""Every family's claims; importing this package fills :data:`checks.verdict.REGISTRY`."""

from checks.claims import softmax_jacobian

__all__ = ["softmax_jacobian"]
