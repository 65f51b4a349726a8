"""Argmax within a bound on h (expressivity.bounded_argmaxable, ``rankwall argmax --bound/--box``): heads
whose reachable tokens within the bound are known by construction, every certificate re-checked in
Fractions, the RMSNorm bound against torch's float32 norm, and the command."""

from __future__ import annotations

import importlib.util
import json
from fractions import Fraction

import numpy as np
import pytest
from test_orderings import infeasible_exactly, realised_exactly

from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, main
from rankwall.checks.models import loading
from rankwall.theory import expressivity as ex
from rankwall.theory import orderings as od
from rankwall.theory.validation import InputError

needs_smollm2 = pytest.mark.skipif(
    importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None,
    reason=f"SmolLM2 is not installed ({loading.INSTALL_HINT})",
)


def assert_certified(W, b, result, region):
    for t in np.flatnonzero(result["argmaxable"]):
        assert realised_exactly(W, b, result["witness"][t], (int(t),)) and od.inside(region, result["witness"][t])
    for t, (pairs, weights) in result["bounded"].items():
        assert infeasible_exactly(W, b, pairs, weights, region), t
    assert not (result["argmaxable"] & result["never"]).any()


class TestWithoutABias:
    """The logits are linear in h: the bound changes no answer, only the size of the witnesses."""

    @pytest.mark.parametrize("region", [od.Ball(1e-3), od.Box(1e-9), od.Ball(1e6), od.Box([1.0, 1e-3, 5.0])])
    def test_the_answers_are_those_without_a_bound(self, region):
        W = np.random.default_rng(3).standard_normal((40, 3))
        free, bounded = ex.argmaxable(W), ex.bounded_argmaxable(W, region=region)
        assert (free["argmaxable"] == bounded["argmaxable"]).all() and (free["never"] == bounded["never"]).all()
        assert bounded["bounded"] == {} and (bounded["argmaxable"] | bounded["never"]).all()
        assert_certified(W, None, bounded, region)


class TestWithABias:
    def test_a_line_of_tangents(self):
        """D = 1, w_v sorted, b_v = -w_v²/2: token v wins exactly on the open interval between the
        midpoints with its neighbours, so within |h| <= R it wins iff that interval meets [-R, R]."""
        W, b = ex.tangent_head(12, 5)
        w = W[:, 0]
        low = np.r_[-np.inf, (w[:-1] + w[1:]) / 2]
        high = np.r_[(w[:-1] + w[1:]) / 2, np.inf]
        for R in (0.05, 0.3, 0.7):
            result = ex.bounded_argmaxable(W, b, region=od.Box(R))
            expected = (high > -R) & (low < R)
            assert result["argmaxable"].tolist() == expected.tolist(), R
            assert result["never"].tolist() == (~expected).tolist(), R
            assert_certified(W, b, result, od.Box(R))

    @pytest.mark.parametrize("region_of", [od.Ball, od.Box])
    def test_a_voronoi_cell_beyond_the_bound(self, region_of):
        P = np.vstack([ex.circle_head(8), [[3.0, 0.0]]])
        b = -(P**2).sum(axis=1) / 2
        near, far = (
            ex.bounded_argmaxable(P, b, region=region_of(1.9)),
            ex.bounded_argmaxable(P, b, region=region_of(2.1)),
        )
        assert near["argmaxable"].tolist() == [True] * 8 + [False] and sorted(near["bounded"]) == [8]
        assert far["argmaxable"].all() and far["bounded"] == {}
        assert_certified(P, b, near, region_of(1.9))
        assert_certified(P, b, far, region_of(2.1))

    def test_tokens_that_never_win_keep_their_certificate(self):
        W = np.vstack([ex.circle_head(6), [[0.0, 0.0]]])
        result = ex.bounded_argmaxable(W, np.r_[np.zeros(6), -1.0], region=od.Ball(10.0))
        assert result["never"][6] and result["method"][6] == "convex combination" and 6 in result["combination"]

    def test_a_region_must_be_given(self):
        with pytest.raises(InputError, match="region: expected a Ball or a Box"):
            ex.bounded_argmaxable(np.eye(3), region=2.0)


class TestRMSNormRegion:
    def test_the_radii_follow_the_gain(self):
        g = np.array([0.5, -2.0, 1.0, 1.5])
        factor = 2 * (1 + ex.gamma(16, 2.0**-24))
        assert od.rms_norm_region(g).radius == pytest.approx(2.0 * factor, rel=1e-15)
        assert od.rms_norm_region(g, "box").radii.tolist() == pytest.approx((np.abs(g) * factor).tolist(), rel=1e-15)

    def test_torchs_float32_rms_norm_stays_inside(self):
        """Random inputs and the inputs that push one coordinate to its extreme (x = e_i, where
        |h_i| = |g_i| sqrt(D / (1 + eps D))) stay in the ball and the box."""
        torch = pytest.importorskip("torch")
        D = 64
        gain = torch.tensor(np.random.default_rng(0).uniform(-3, 3, D), dtype=torch.float32)
        ball, box = od.rms_norm_region(gain.numpy(), "ball"), od.rms_norm_region(gain.numpy(), "box")
        x = torch.cat([torch.randn(500, D) * 10, torch.eye(D) * 1e3, torch.eye(D) * 1e-3])
        h = gain * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5))
        assert all(od.inside(ball, row) and od.inside(box, row) for row in h.double().numpy())

    @pytest.mark.parametrize(
        ("gain", "kind", "message"),
        [
            ([1.0, 0.0], "box", "a zero gain"),
            ([1.0], "sphere", "kind"),
            ([np.nan], "ball", "finite"),
            ([], "ball", "non-empty"),
        ],
    )
    def test_bad_gains_are_refused(self, gain, kind, message):
        with pytest.raises(InputError, match=message):
            od.rms_norm_region(gain, kind)


class TestCommand:
    def test_a_ball_and_a_box(self, tmp_path, capsys):
        P = np.vstack([ex.circle_head(8), [[3.0, 0.0]]])
        np.savez(tmp_path / "voronoi.npz", W=P, b=-(P**2).sum(axis=1) / 2)
        for flag in ("--bound", "--box"):
            assert main(["argmax", "--head", str(tmp_path / "voronoi.npz"), flag, "1.9", "--json"]) == EXIT_OK
            record = json.loads(capsys.readouterr().out)
            assert record["unargmaxable"] == [8] and record["never_within_the_bound_only"] == [8]
            assert record["region"]["kind"] == ("ball" if flag == "--bound" else "box")
            assert record["region"]["from"] == "given"

    @pytest.mark.parametrize(
        ("flags", "message"),
        [
            (["--bound", "-1"], "not a positive finite radius"),
            (["--bound", "inf"], "not a positive finite radius"),
            (["--box", "wide"], "expected a positive number or 'norm'"),
            (["--bound", "1", "--box", "1"], "not allowed with argument"),
            (["--bound", "norm"], "holds only a head"),
        ],
    )
    def test_bad_bounds_exit_two(self, tmp_path, capsys, flags, message):
        np.save(tmp_path / "head.npy", np.eye(3))
        assert main(["argmax", "--head", str(tmp_path / "head.npy"), *flags]) == EXIT_USAGE
        assert message in capsys.readouterr().err


@needs_smollm2
class TestSmolLM2:
    @pytest.mark.slow  # the sha256 and GGUF read of the shipped model; test_loading's tiny GGUF is the fast one
    def test_the_final_norm_gain(self):
        g = loading.load_final_norm("smollm2")
        assert g.shape == (576,) and np.all(g != 0)
        assert od.rms_norm_region(g).radius == pytest.approx(np.abs(g).max() * 24 * (1 + ex.gamma(1160, 2.0**-24)))

    @pytest.mark.slow  # SmolLM2's head; TestWithoutABias is the same contract on small heads
    def test_the_bound_changes_no_answer_on_a_sample(self):
        """SmolLM2's head has no bias, so within its RMSNorm ball the answers are those without a bound;
        the sample holds every duplicated row and tokens spread over the vocabulary."""
        W, _, _ = loading.load_head("smollm2")
        sample = np.r_[np.arange(5, 17), 36743, 36744, 45175, 48047, np.arange(0, len(W), 4099)]
        region = od.rms_norm_region(loading.load_final_norm("smollm2"))
        free, bounded = ex.argmaxable(W, tokens=sample), ex.bounded_argmaxable(W, region=region, tokens=sample)
        assert (free["never"][sample] == bounded["never"][sample]).all()
        assert (free["argmaxable"][sample] == bounded["argmaxable"][sample]).all()
        assert all(od.inside(region, bounded["witness"][t]) for t in sample[bounded["argmaxable"][sample]])

    def test_a_head_file_has_no_norm_and_a_folder_without_one_is_refused(self, tmp_path):
        (tmp_path / "head.safetensors").write_bytes(b"not read")
        with pytest.raises(InputError, match="holds only a head"):
            loading.load_final_norm(tmp_path / "head.safetensors")
        with pytest.raises(InputError, match="does not exist"):
            loading.load_final_norm(tmp_path / "absent.gguf")


def test_fractions_helpers_reject_what_is_false():
    """The helpers this module trusts can fail: a losing h, and weights that do not cancel."""
    W = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    assert not realised_exactly(W, None, [0.0, 1.0], (0,))
    assert not infeasible_exactly(W, None, [(0, 1)], [Fraction(1)])
