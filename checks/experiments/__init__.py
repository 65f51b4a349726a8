"""Experiments: runs that measure the theory on synthetic and real data, writing JSON and PNG."""
