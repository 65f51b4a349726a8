"""Every family's claims; importing this package fills :data:`checks.verdict.REGISTRY`."""

from checks.claims import compression, error_rank, expressivity, heads, softmax_jacobian, updates

__all__ = ["compression", "error_rank", "expressivity", "heads", "softmax_jacobian", "updates"]
