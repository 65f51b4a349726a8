"""Prop. A.6 past 2D tokens (rankwall.checks.experiments.gradient_tail): the tail measure against an
SVD's on planted spectra, its structural zero at n <= 2D, the command on a tiny model, and the
recorded SmolLM2 run (the command on a tiny model: tests/test_spot.py, which has one loaded)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.checks.engine import tolerance
from rankwall.checks.experiments import gradient_tail as gt
from rankwall.checks.models import loading
from rankwall.theory import updates as up

RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments" / "gradient_tail.json"
needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None or importlib.util.find_spec("transformers") is None,
    reason=f"SmolLM2 or transformers is not installed ({loading.INSTALL_HINT})",
)


def planted(rows: int, columns: int, sigma: np.ndarray, seed: int = 0) -> np.ndarray:
    """A rows x columns matrix with the singular values ``sigma`` (then zeros)."""
    rng = np.random.default_rng(seed)
    U, _ = np.linalg.qr(rng.standard_normal((rows, len(sigma))))
    V, _ = np.linalg.qr(rng.standard_normal((columns, len(sigma))))
    return (U * sigma) @ V.T


@pytest.mark.parametrize("D", [1, 3, 8, 15, 30])
def test_the_tail_is_the_eckart_young_residual_and_its_lower_bound_is_below_it(D):
    """Against theory.updates.tail_norm (a dense SVD, sharing no code): equal within the Gram route's
    error (its margin over the norm, per singular value beyond 2D), and the certified end never above."""
    sigma = np.geomspace(1.0, 1e-4, 40)
    G = planted(40, 500, sigma)
    row = gt.tail_row(G, D)
    reference = up.tail_norm(G, min(2 * D, 40)) / np.linalg.norm(G)
    slack = (40 - min(2 * D, 40)) ** 0.5 * row["margin"] / np.linalg.norm(G) + tolerance.gamma(G.size, 2.0**-53)
    assert abs(row["tail_beyond_2D"] - reference) <= slack
    assert 0 <= row["tail_beyond_2D_lower"] <= row["tail_beyond_2D"]
    assert row["certified_rank"] <= 40 and row["components_70"] <= row["components_99.9"] <= 40
    if 2 * D >= 40:
        assert row["tail_beyond_2D"] == row["tail_beyond_2D_lower"] == row["sigma_2D_plus_1"] == 0.0


def test_a_block_of_at_most_2D_rows_has_no_tail_whatever_its_spectrum():
    """rank G <= n <= 2D: the bound of Prop. A.6 is identically zero, which is why the spot check's
    batches of at most 1,024 tokens (2D = 1,152 on SmolLM2) cannot bear on it."""
    G = np.random.default_rng(1).standard_normal((12, 300))
    assert gt.tail_row(G, 6)["tail_beyond_2D"] == 0.0
    assert gt.tail_row(G, 5)["tail_beyond_2D"] > 0
    assert gt.batch_sizes(2048, 576) == [1024, 1152, 2048]


def test_a_rank_deficient_block_is_not_certified_past_its_rank():
    """Planted rank 10 in 30 rows: the certified rank never exceeds 10, and the certified tail beyond
    2D = 10 is 0 (the computed one is rounding)."""
    G = planted(30, 200, np.linspace(2.0, 1.0, 10))
    row = gt.tail_row(G, 5)
    assert row["certified_rank"] <= 10 and row["tail_beyond_2D_lower"] == 0.0
    assert row["tail_beyond_2D"] <= 30**0.5 * row["margin"] / np.linalg.norm(G)


def test_the_recorded_run_shows_a_certified_positive_tail_past_2D_only():
    record = json.loads(RECORDED.read_text())
    two_D = 2 * record["D"]
    for name, rows in record["heads"].items():
        for r in rows:
            assert r["two_D"] == two_D and r["components_70"] <= r["components_99.9"] <= r["tokens"]
            assert 0 <= r["tail_beyond_2D_lower"] <= r["tail_beyond_2D"], name
            if r["tokens"] <= two_D:
                assert r["tail_beyond_2D"] == 0.0
            if r["certified_rank"] > two_D:
                assert r["tail_beyond_2D_lower"] > 0, name
    assert max(r["tokens"] for r in record["heads"][gt.MODEL_HEAD]) > two_D


@pytest.mark.slow
@needs_smollm2
def test_the_recorded_run_is_reproduced(tmp_path, capsys):
    """docs/experiments.md quotes docs/_static/experiments/gradient_tail.json: the same command gives the
    same certified ranks, and tails up to float32 forward-pass differences across machines (1e-3, as
    for the spot check's shares)."""
    assert main(["experiment", "gradient-tail", "--out", str(tmp_path), "--json"]) == 0
    fresh, recorded = json.loads(capsys.readouterr().out), json.loads(RECORDED.read_text())
    for name in recorded["heads"]:
        for a, b in zip(fresh["heads"][name], recorded["heads"][name], strict=True):
            assert (a["tokens"], a["certified_rank"]) == (b["tokens"], b["certified_rank"])
            assert abs(a["tail_beyond_2D"] - b["tail_beyond_2D"]) <= 1e-3 * max(b["tail_beyond_2D"], 1e-12) + 1e-6
