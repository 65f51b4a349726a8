"""The training experiments (SpamLang, low-rank heads) at toy sizes, and their recorded full runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments"


class TestSpamLang:
    def test_tied_head_shares_the_embedding(self):
        from rankwall.checks.experiments import spamlang

        tied, untied = spamlang.make_model(32, 4, True, 0), spamlang.make_model(32, 4, False, 0)
        assert tied.head.weight is tied.embed.weight and untied.head.weight is not untied.embed.weight

    def test_a_small_vocabulary_is_learned(self):
        from rankwall.checks.experiments import spamlang

        record = spamlang.train(64, False, D=16, steps=60)
        assert record["loss"][0] > 0.9 * np.log(64) and record["final_loss"] < 0.5 * np.log(64)

    def test_cli_runs_every_size_and_the_control(self, tmp_path, capsys):
        assert main(["experiment", "spamlang", "--steps", "1", "--out", str(tmp_path), "--json"]) == 0
        records = json.loads(capsys.readouterr().out)
        assert [r["V"] for r in records if r["role"] == "sweep"] == [1024, 4096, 16384, 65536, 131072] * 2
        assert [(r["V"], r["D"]) for r in records if r["role"] != "sweep"] == [(1024, 1024)] * 2
        assert (tmp_path / "spamlang.png").is_file()


class TestLowRankHeads:
    def test_bpe_is_trained_locally_to_the_requested_size(self):
        from rankwall.checks.companion.data import read_corpus
        from rankwall.checks.experiments import lowrank_heads

        ids, V = lowrank_heads.bpe_ids(read_corpus("tinyshakespeare.txt")[:200_000], 512, 0)
        assert V == 512 and ids.min() >= 0 and ids.max() < V

    def test_the_head_has_rank_at_most_D(self):
        import torch

        from rankwall.checks.experiments import lowrank_heads

        model = lowrank_heads.make_model(300, 8, 0)
        W = model.A.weight.detach().double() @ model.B.weight.detach().double()
        assert torch.linalg.matrix_rank(W).item() == 8

    def test_speedup_reads_the_first_crossing(self):
        from rankwall.checks.experiments.lowrank_heads import speedup

        slow = {"tokens": [1, 2, 3, 4], "valid_loss": [5.0, 4.0, 3.5, 3.0]}
        fast = {"tokens": [1, 2, 3, 4], "valid_loss": [4.0, 3.0, 2.5, 2.0]}
        assert speedup(fast, slow) == 2.0 and speedup(slow, fast) is None

    @pytest.mark.slow  # trains the eight heads: 3.5 min in the default run
    def test_cli_writes_both_sweeps(self, tmp_path, capsys):
        from rankwall.checks.experiments import lowrank_heads

        steps = lowrank_heads.EVAL_EVERY
        assert main(["experiment", "lowrank-heads", "--steps", str(steps), "--out", str(tmp_path), "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert [r["D"] for r in result["bpe"]["runs"]] == list(lowrank_heads.BPE_DIMENSIONS)
        assert result["characters"]["V"] == 65 and (tmp_path / "lowrank_heads.png").is_file()
        for r in result["bpe"]["runs"]:
            destroyed, cosine = np.array(r["eq1"]["destroyed"]), np.array(r["eq1"]["cosine"])
            assert len(cosine) == len(r["tokens"]) and np.allclose(destroyed**2 + cosine**2, 1, atol=1e-12)
            final = r["final_heads"]
            assert final["trained"]["cosine"] == pytest.approx(cosine[-1], rel=1e-12)
            split = final["efficiency"]
            assert split["kernel"] * split["anisotropy"] == pytest.approx(split["total"], rel=1e-12)
            assert split["kernel"] == pytest.approx(1 / cosine[-1], rel=1e-12)
        assert all("eq1" not in r for r in result["characters"]["runs"])

    def test_eq1_is_measured_on_the_head_the_model_uses(self):
        import torch

        from rankwall.checks.experiments import lowrank_heads
        from rankwall.theory import compression as cp

        V, D = 300, 4
        model = lowrank_heads.make_model(V, D, 0)
        x = torch.randint(V, (2, 9), generator=torch.Generator().manual_seed(0))
        W, H, targets = lowrank_heads.head_and_gradient(model, x[:, :-1], x[:, 1:])
        with torch.no_grad():
            logits = model(x[:, :-1]).flatten(0, 1).double().numpy()
        assert np.allclose(H @ W.T, logits, atol=1e-5) and np.linalg.matrix_rank(W) == D
        G = np.concatenate(list(cp.logit_gradient_blocks(H, W, targets)))
        shares = lowrank_heads.eq1_of(W, G)
        assert 0 < shares["cosine"] < 1 and shares["destroyed"] ** 2 + shares["cosine"] ** 2 == pytest.approx(1)
        final = lowrank_heads.final_heads(W, G, D, 0)
        assert final["trained"] == shares
        assert final["random_subspace_same_gradient"]["cosine"] != pytest.approx(shares["cosine"], rel=1e-6)


def all_losses(result: list | dict) -> np.ndarray:
    """Every logged loss of an experiment's output, in order."""
    if isinstance(result, list):
        return np.array([x for run in result for x in run["loss"]])
    return np.array([x for k in ("bpe", "characters") for run in result[k]["runs"] for x in run["valid_loss"]])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["spamlang", "lowrank-heads"])
def test_the_recorded_run_is_reproduced(tmp_path, name, capsys):
    """The docs quote docs/_static/experiments/*.json: rerunning with the same seed gives the same
    losses up to float32 training noise across machines (1e-2 absolute on losses of order 1 to 10)."""
    assert main(["experiment", name, "--out", str(tmp_path), "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    recorded = json.loads((RECORDED / f"{name.replace('-', '_')}.json").read_text())
    assert np.allclose(all_losses(fresh), all_losses(recorded), atol=1e-2)
