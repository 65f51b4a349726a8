"""`argmax` exports its certificates exactly (issue 19): each never token's convex weights and each
argmaxable token's winning h, re-checked here in Fractions from the files alone."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, main


def argmax(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["argmax", *argv])
    return code, json.loads(capsys.readouterr().out) if code == EXIT_OK else {}


def exact(x: float) -> Fraction:
    return Fraction(float(x))


@pytest.mark.parametrize("bias", [False, True])
def test_every_answer_re_checks_from_the_exported_files(capsys, tmp_path, bias):
    rng = np.random.default_rng(3)
    W = np.r_[rng.standard_normal((24, 3)), [[0.0, 0.0, 0.0]], rng.standard_normal((1, 3))]
    W[-1] = W[0]  # a duplicated row: neither copy is ever the strict argmax
    b = rng.standard_normal(len(W)) * 0.1 if bias else np.zeros(len(W))
    path = tmp_path / "head.npz"
    np.savez(path, W=W, b=b) if bias else np.save(tmp_path / "head.npy", W)
    head = str(path if bias else tmp_path / "head.npy")
    code, record = argmax(capsys, "--head", head, "--json", "--certificates", str(tmp_path / "out"))
    assert code == EXIT_OK
    on_disk = json.loads((tmp_path / "out" / "never.json").read_text())
    assert on_disk["never"] == record["never_certificates"]
    never = {int(t) for t in record["never_certificates"]}
    twins = (0, len(W) - 1)  # without a bias neither copy wins; with one, the copy of smaller bias never does
    assert never == set(record["unargmaxable"])
    assert set(twins) <= never if not bias else min(twins, key=lambda t: b[t]) in never
    Wq = [[exact(x) for x in row] for row in W]
    bq = [exact(x) for x in b]
    for token, certificate in record["never_certificates"].items():
        i, rows = int(token), certificate["rows"]
        weights = [Fraction(w) for w in certificate["weights"]]
        assert i not in rows and all(w >= 0 for w in weights) and sum(weights) == 1
        for k in range(W.shape[1]):
            assert sum(w * Wq[r][k] for w, r in zip(weights, rows, strict=True)) == Wq[i][k]
        assert sum(w * bq[r] for w, r in zip(weights, rows, strict=True)) >= bq[i]
    winning = np.load(tmp_path / "out" / "winning_h.npy")
    assert winning.shape == W.shape
    winners = [t for t in range(len(W)) if not np.isnan(winning[t]).any()]
    assert len(winners) == record["argmaxable"] and not set(winners) & never
    for t in winners:
        h = [exact(x) for x in winning[t]]
        logits = [sum(a * x for a, x in zip(row, h, strict=True)) + c for row, c in zip(Wq, bq, strict=True)]
        assert all(logits[t] > z for j, z in enumerate(logits) if j != t)


def test_a_file_where_the_folder_goes_is_refused(capsys, tmp_path):
    np.save(tmp_path / "head.npy", np.eye(3))
    (tmp_path / "taken").write_text("")
    code = main(["argmax", "--head", str(tmp_path / "head.npy"), "--certificates", str(tmp_path / "taken")])
    assert code == EXIT_USAGE and "--certificates" in capsys.readouterr().err
