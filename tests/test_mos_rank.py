"""``rankwall experiment mos-rank`` at toy sizes, against an independent high-precision rank, and
its recorded run (docs/_static/experiments/mos_rank.json)."""

from __future__ import annotations

import json
from pathlib import Path

import flint
import numpy as np
import pytest

from rankwall.checks import exact
from rankwall.checks.claims import heads as ch
from rankwall.checks.cli import main
from rankwall.checks.experiments import mos_rank
from rankwall.theory import heads as hd
from rankwall.theory.validation import InputError

RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments" / "mos_rank.json"
BITS = 512


# --------------------------------------------------------------------------- an independent oracle


def _lse(values: list[flint.arb]) -> flint.arb:
    return sum((v.exp() for v in values), flint.arb(0)).log()


def _dot(row: np.ndarray, h: list[flint.arb]) -> flint.arb:
    return sum((exact.ball(float(a)) * x for a, x in zip(row, h, strict=True)), flint.arb(0))


def ball_log_probabilities(head: str, theta: hd.HeadParameters, H: np.ndarray) -> list[list[flint.arb]]:
    """log P of a softmax, MoC or MoS head in ball arithmetic from the float parameters read exactly
    (written from the head's definition, independently of :mod:`rankwall.theory.heads`)."""
    rows = []
    for h_float in H:
        h = [exact.ball(float(x)) for x in h_float]
        if head == "softmax":
            states, log_pi = [h], [flint.arb(0)]
        else:
            states = [[_dot(P_row, h).tanh() for P_row in P_k] for P_k in theta.P]
            prior = [_dot(U_k, h) for U_k in theta.U]
            log_pi = [p - _lse(prior) for p in prior]
        if head == "moc":
            weights = [x.exp() for x in log_pi]
            states = [
                [sum((w * s[t] for w, s in zip(weights, states, strict=True)), flint.arb(0)) for t in range(len(h))]
            ]
            log_pi = [flint.arb(0)]
        components = []
        for state in states:
            z = [_dot(w, state) for w in theta.W]
            components.append([x - _lse(z) for x in z])
        rows.append([_lse([lp + c[j] for lp, c in zip(log_pi, components, strict=True)]) for j in range(len(theta.W))])
    return rows


def ball_rank_lower(rows: list[list[flint.arb]]) -> int:
    """Gaussian elimination with full pivoting on balls, stopping when no entry excludes zero: the
    pivots are certified nonzero, and their product is a nonzero minor, so their count bounds the rank
    of every matrix in the balls from below."""
    A = [list(r) for r in rows]
    rank = 0
    while A and A[0]:
        candidates = [(abs(x.mid()), i, j) for i, r in enumerate(A) for j, x in enumerate(r) if not x.contains(0)]
        if not candidates:
            break
        _, i, j = max(candidates)
        pivot_row = A.pop(i)
        pivot = pivot_row.pop(j)
        A = [[x - r[j] / pivot * y for x, y in zip(r[:j] + r[j + 1 :], pivot_row, strict=True)] for r in A]
        rank += 1
    return rank


def exact_rank(case: ch.HeadCase) -> int | None:
    """rank(log P) at ``BITS`` bits when the certified pivots reach the proved bound (min(N, d + 1)
    for a head that is a softmax of one state, min(N, V) otherwise); ``None`` if they stop short."""
    theta, H = ch.contexts(case)
    head = "softmax" if ch.single_state(case.head, theta) and case.head == "mos" else case.head
    with exact.precision(BITS):
        lower = ball_rank_lower(ball_log_probabilities(head, theta, H))
    proved = min(case.N, case.d + 1) if head != "mos" else min(case.N, case.V)
    return lower if lower == proved else None


SMALL = [
    ch.HeadCase(head=head, N=N, V=V, d=d, K=K, seed=seed, scale=scale)
    for head, N, V, d, K, seed, scale in [
        ("softmax", 7, 9, 2, 1, 0, 1.0),
        ("moc", 8, 6, 3, 3, 1, 3.0),
        ("mos", 6, 8, 2, 1, 2, 1.0),
        ("mos", 8, 8, 2, 2, 3, 1.0),
        ("mos", 9, 7, 1, 3, 4, 3.0),
        ("mos", 10, 10, 3, 4, 5, 0.3),
    ]
]


# --------------------------------------------------------------------------- the oracle can fail


def test_ball_rank_sees_a_rank_deficiency():
    """Two equal rows and a zero row: the oracle certifies 2 of 4 rows, not more."""
    rows = [[exact.ball(x) for x in r] for r in ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 1.0, 5.0], [0.0, 0.0, 0.0])]
    with exact.precision(BITS):
        assert ball_rank_lower(rows) == 2


def test_ball_log_probabilities_agree_with_the_float_head():
    """The oracle evaluates the same function as theory.heads (to float64 rounding)."""
    for case in SMALL:
        theta, H = ch.contexts(case)
        with exact.precision(BITS):
            balls = ball_log_probabilities(case.head, theta, H)
        L = np.asarray(hd.log_probabilities(case.head, theta, H))
        assert np.allclose(L, [[float(x.mid()) for x in r] for r in balls], rtol=0, atol=1e-12), case


# --------------------------------------------------------------------------- the certified interval


@pytest.mark.parametrize("case", SMALL, ids=lambda c: f"{c.head}-K{c.K}-d{c.d}")
def test_the_interval_contains_the_exact_rank(case):
    """The float64 lower end never exceeds the rank computed at 512 bits; the upper end never falls
    below it."""
    truth = exact_rank(case)
    assert truth is not None, "the 512-bit elimination reaches the proved bound on these cases"
    record = mos_rank.measure(case)
    assert record["rank_lower"] <= truth <= record["rank_upper"], (record["rank_lower"], truth, record["rank_upper"])


def test_mos_with_one_component_is_the_softmax_rank():
    """K = 1: MoS is a softmax of its single latent, pinned at most D + 1, as the plain softmax."""
    result = mos_rank.run(N=24, V=20, D_values=(2, 3), K_values=(1, 2))
    for D in (2, 3):
        (one,) = [r for r in result["records"] if r["head"] == "mos" and r["D"] == D and r["K"] == 1]
        (plain,) = [r for r in result["records"] if r["head"] == "softmax" and r["D"] == D]
        assert one["pinned"] and plain["pinned"]
        assert one["rank_upper"] == plain["rank_upper"] <= D + 1
        assert one["upper_from"].startswith("the factorization")


def test_moc_never_exceeds_D_plus_one_and_mos_breaks_it():
    """MoC's interval sits at or below D + 1 for every K; MoS with K >= 2 is certified above it and,
    at D = 6 on 30 x 30, pinned at the ceiling min(N, V) from K = 2."""
    result = mos_rank.run(N=30, V=30, D_values=(1, 6), K_values=(1, 2, 5))
    for r in result["records"]:
        if r["head"] == "moc":
            assert r["rank_lower"] <= r["rank_upper"] <= r["D"] + 1, r
        if r["head"] == "mos" and r["K"] >= 2:
            assert r["rank_lower"] > r["D"] + 1, r
            assert r["rank_upper"] == result["ceiling"] == 30
    assert result["saturation_K"]["6"] == 2


def test_saturation_reports_none_below_the_ceiling():
    records = [{"head": "mos", "D": 2, "K": K, "rank_lower": lo} for K, lo in ((1, 3), (2, 40), (4, 64))]
    assert mos_rank.saturation(records, 2, 64) == 4
    assert mos_rank.saturation(records, 2, 65) is None


def test_too_large_a_run_is_refused_naming_K():
    with pytest.raises(InputError, match=r"^K: "):
        mos_rank.run(N=4096, V=4096, D_values=(2,), K_values=(8,))


def test_the_command_writes_json_and_png(tmp_path, capsys):
    argv = ["experiment", "mos-rank", "--N", "12", "--V", "10", "--D", "2", "--K", "1", "3", "--out", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [(r["head"], r["K"]) for r in result["records"]] == [
        ("softmax", 1),
        ("moc", 1),
        ("moc", 3),
        ("mos", 1),
        ("mos", 3),
    ]
    assert (tmp_path / "mos_rank.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "mos_rank.json").read_text())["records"] == result["records"]


def test_a_bad_K_is_a_usage_error(tmp_path, capsys):
    assert main(["experiment", "mos-rank", "--K", "0", "--out", str(tmp_path)]) == 2
    assert "--K: 0 is out of range" in capsys.readouterr().err


def test_the_recorded_run_has_the_shape_the_docs_read():
    """The recorded default run: every interval is consistent, softmax and MoC at most D + 1."""
    recorded = json.loads(RECORDED.read_text())
    assert recorded["ceiling"] == min(recorded["N"], recorded["V"])
    for r in recorded["records"]:
        assert r["rank_lower"] <= r["rank_upper"] <= recorded["ceiling"]
        if r["head"] != "mos" or r["K"] == 1:
            assert r["rank_upper"] <= r["D"] + 1


@pytest.mark.slow
def test_the_recorded_run_is_reproduced(tmp_path, capsys):
    """Re-running the recorded default command gives the same certified ends and numerical ranks."""
    assert main(["experiment", "mos-rank", "--out", str(tmp_path), "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    recorded = json.loads(RECORDED.read_text())
    keys = ("head", "D", "K", "rank_lower", "rank_upper", "numerical_rank")
    assert [{k: r[k] for k in keys} for r in fresh["records"]] == [{k: r[k] for k in keys} for r in recorded["records"]]
    assert fresh["saturation_K"] == recorded["saturation_K"]
