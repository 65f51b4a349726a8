"""The update-efficiency ratio split into kernel (1/c) and anisotropy (efficiency-anatomy experiment)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.checks.experiments import efficiency_anatomy as ea
from rankwall.checks.models import loading
from rankwall.theory import compression as cp
from rankwall.theory.validation import InputError

RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments" / "efficiency_anatomy.json"


def gradient(W: np.ndarray, tokens: int = 96, seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    H, targets = cp.construct_batch(tokens, W.shape[1], W.shape[0], seed)
    return H, targets, np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))


@pytest.mark.parametrize(
    "W",
    [
        cp.construct_head(300, 8, 0),
        cp.construct_head(300, 40, 2, rank=5),
        np.diag(np.geomspace(1, 100, 20))[:, :20].repeat(3, axis=0)[:50],
    ],
    ids=["gaussian", "low-rank", "spread"],
)
def test_kernel_times_anisotropy_is_the_total(W):
    _, _, G = gradient(W)
    split = cp.efficiency_split(G, W)
    assert split.kernel * split.anisotropy == pytest.approx(split.total, rel=1e-12)
    assert split.anisotropy >= 1 - 1e-12 and split.kernel >= 1
    # The anisotropy part is sqrt(1 + CV^2) of sigma^2 under the energies w.
    w, s2 = split.energies / split.energies.sum(), split.singular_values**2
    mean = w @ s2
    assert split.anisotropy == pytest.approx(np.sqrt(1 + (w @ (s2 - mean) ** 2) / mean**2), rel=1e-12)


def test_an_isotropic_head_has_anisotropy_one():
    W = ea.isotropic_head(400, 12, 3, scale=0.7)
    _, _, G = gradient(W)
    split = cp.efficiency_split(G, W)
    assert split.anisotropy == pytest.approx(1, abs=1e-12)
    assert split.total == pytest.approx(split.kernel, rel=1e-12)


def test_anisotropy_on_two_known_singular_values():
    # W = diag(1, 2) on two coordinates of R^4, G with unit energy on each: sqrt((1 + 16) * 2) / (1 + 4).
    W = np.zeros((4, 2))
    W[0, 0], W[1, 1] = 1.0, 2.0
    G = np.array([[1.0, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.5]])
    split = cp.efficiency_split(G, W)
    assert split.anisotropy == pytest.approx(np.sqrt(34) / 5, rel=1e-14)
    assert split.kernel == pytest.approx(np.sqrt(2.5 / 2), rel=1e-14)


def test_the_split_does_not_depend_on_the_scale_of_the_head():
    W = cp.construct_head(200, 10, 4, rank=3)
    _, _, G = gradient(W)
    a, b = cp.efficiency_split(G, W), cp.efficiency_split(G, 1e3 * W)
    assert (a.kernel, a.anisotropy, a.total) == pytest.approx((b.kernel, b.anisotropy, b.total), rel=1e-10)


def test_first_order_ratio_matches_the_measured_one_at_a_small_step():
    W = cp.construct_head(256, 32, 5, rank=4)
    H, targets = cp.construct_batch(64, W.shape[1], 256, 6)
    row = ea.anatomy(H, W, targets)
    assert row["measured_ratio"][str(ea.FRACTIONS[0])] == pytest.approx(row["total"], rel=1e-3)
    assert row["product_relative_error"] < 1e-12


def test_bad_gradients_are_refused_by_name():
    W = cp.construct_head(50, 4, 0)
    with pytest.raises(InputError, match="G"):
        cp.efficiency_split(np.ones((3, 49)), W)
    with pytest.raises(InputError, match="G: the gradient is zero"):
        cp.efficiency_split(np.zeros((3, 50)), W)
    with pytest.raises(InputError, match="G: no component"):
        cp.efficiency_split(np.eye(50)[4:7], 2 * np.eye(50)[:, :4])


def test_cli_writes_every_synthetic_head(tmp_path, capsys):
    argv = ["experiment", "efficiency-anatomy", "--no-model", "--V", "512", "--tokens", "64", "--out", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    heads = json.loads(capsys.readouterr().out)["heads"]
    assert len(heads) == ea.head_count(ea.DIMENSIONS)
    assert all(h["product_relative_error"] < 1e-12 for h in heads)
    control = [h for h in heads if h["kind"] == "isotropic control"]
    assert control and control[0]["anisotropy"] == pytest.approx(1, abs=1e-12)
    assert (tmp_path / "efficiency_anatomy.png").is_file()


def test_cli_refuses_a_vocabulary_below_the_low_rank_width(tmp_path):
    assert main(["experiment", "efficiency-anatomy", "--no-model", "--V", "100", "--out", str(tmp_path)]) == 2


@pytest.mark.slow  # loads SmolLM2 and runs its gradient: minutes; the split's contract is tested above
@pytest.mark.skipif(
    importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None or importlib.util.find_spec("transformers") is None,
    reason=f"SmolLM2 or transformers is not installed ({loading.INSTALL_HINT})",
)
def test_smollm2_ratio_is_mostly_anisotropy():
    row = ea.smollm2(48)
    assert row["product_relative_error"] < 1e-12
    assert row["measured_ratio"][str(ea.FRACTIONS[0])] == pytest.approx(row["total"], rel=1e-3)
    assert row["anisotropy"] > 3 and row["total"] > 3 * row["kernel"]


@pytest.mark.slow
def test_the_recorded_run_is_reproduced(tmp_path, capsys):
    """The docs quote efficiency_anatomy.json: the default command gives the same factors (the
    synthetic heads to rounding, SmolLM2 to float32 forward noise across machines)."""
    assert main(["experiment", "efficiency-anatomy", "--out", str(tmp_path), "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)["heads"]
    recorded = json.loads(RECORDED.read_text())["heads"]
    assert [h["kind"] for h in fresh] == [h["kind"] for h in recorded]
    for a, b in zip(fresh, recorded, strict=True):
        assert (a["kernel"], a["anisotropy"]) == pytest.approx((b["kernel"], b["anisotropy"]), rel=1e-3)
