"""The trained-model rows in miniature (issue 31, item 3): SpamLang generations (Table 1), models that
share D at two depths (Figure 6), and softmax / MoC / MoS language models (seed 001); and the recorded
attention trajectory re-derived from its records. Each at a small size; the recorded runs under --runslow."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments"


class TestSpamLangGenerations:
    def test_fit_is_train_with_the_model(self):
        from rankwall.checks.experiments import spamlang

        model, record = spamlang.fit(48, True, D=8, steps=3)
        assert record["loss"] == spamlang.train(48, True, D=8, steps=3)["loss"]
        assert model.head.weight.shape == (48, 8)

    @pytest.mark.parametrize("repeat", [True, False])
    def test_runs_of_a_model_that_always_or_never_repeats(self, repeat):
        """A model whose logits put all mass on the token itself (or none on it): every run is the full
        length (or 0), as the model's own repeat probability predicts."""
        import torch

        from rankwall.checks.experiments.spamlang_generations import generate

        V = 12

        def model(x):
            eye = torch.nn.functional.one_hot(x, V).float()
            return 1e4 * eye if repeat else -1e4 * eye

        sample = generate(model, V, prompts=40, length=9)
        full = 9 if repeat else 0
        assert sample["mean_run"] == sample["expected_mean_run"] == full
        assert sample["correct_share"] == (1.0 if repeat else 0.0)
        assert sample["run_histogram"][full] == 40

    def test_the_cli_contract(self, tmp_path, capsys):
        argv = ["experiment", "spamlang-generations", "--steps", "2", "--prompts", "8", "--vocabularies", "32,64"]
        argv += ["--out", str(tmp_path)]
        assert main([*argv, "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert [(r["V"], r["tied"]) for r in result["records"]] == [(32, True), (64, True), (32, False), (64, False)]
        assert all(sum(r["run_histogram"]) == 8 for r in result["records"])
        assert (tmp_path / "spamlang_generations.png").is_file()


class TestEfficiencyDepth:
    def test_a_checkpoint_measures_both_directions_and_the_split(self):
        import torch

        from rankwall.checks.experiments import efficiency_depth as ed
        from rankwall.checks.models import tiny

        model = tiny.make_tiny(tiny.TinyConfig(V=300, width=16, layers=1, heads=4, context=8), seed=0)
        x = torch.randint(300, (4, 9), generator=torch.Generator().manual_seed(0))
        point = ed.measure(model, x[:, :-1], x[:, 1:])
        first = point["first_order"]
        assert first["kernel"] * first["anisotropy"] == pytest.approx(first["total"], rel=1e-10)
        assert point["ratio"][0] == pytest.approx(first["total"], rel=0.05)  # t = 1e-4: first order
        assert all(r is None or r > 1 for r in point["ratio"])

    def test_collapse_compares_the_pair_with_the_control(self):
        from rankwall.checks.experiments.efficiency_depth import collapse

        def run(ratios):
            return {"checkpoints": [{"step": 10, "ratio": ratios}]}

        rows = collapse([run([10.0, 20.0]), run([11.0, 20.0]), run([40.0, 80.0])])
        assert rows == [{"step": 10, "within_pair": pytest.approx(np.log(1.1)), "to_control": pytest.approx(np.log(4))}]


class TestMixtureLanguageModels:
    @pytest.mark.parametrize("head", ["softmax", "moc", "mos"])
    def test_the_torch_heads_are_the_theorys(self, head):
        import torch

        from rankwall.checks.experiments import mos_lm
        from rankwall.theory import heads as hd

        model = mos_lm.make_lm(head, 40, 8, 3, 0).double()
        h = torch.randn(6, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
        ours = model.log_probabilities(h).detach().numpy()
        reference = np.asarray(hd.log_probabilities(head, model.parameters_theory(), h.numpy()))
        assert np.allclose(ours, reference, rtol=0, atol=1e-12)

    def test_ranks_are_certified_at_both_ends_or_past_the_ceiling(self):
        from rankwall.checks.experiments.mos_lm import log_probability_rank
        from rankwall.theory import heads as hd

        theta = hd.construct_head_parameters(30, 4, 3, 0)
        H = np.random.default_rng(1).standard_normal((20, 4))
        softmax, mos = log_probability_rank("softmax", theta, H), log_probability_rank("mos", theta, H)
        assert softmax["rank_lower"] == softmax["rank_upper"] == 5  # d + 1, pinned
        assert mos["rank_lower"] > 5 and mos["rank_upper"] == 20

    def test_the_pairwise_kl_against_a_double_loop(self):
        from rankwall.checks.experiments.mos_lm import log_probability_rank
        from rankwall.theory import heads as hd

        theta = hd.construct_head_parameters(12, 3, 2, 2)
        H = np.random.default_rng(3).standard_normal((5, 3))
        L = np.asarray(hd.log_probabilities("mos", theta, H))
        pairs = [np.sum(np.exp(L[a]) * (L[a] - L[b])) for a in range(5) for b in range(5) if a != b]
        assert log_probability_rank("mos", theta, H)["expected_pairwise_kl"] == pytest.approx(np.mean(pairs), rel=1e-12)

    def test_the_softmax_model_is_matched_from_above(self):
        from rankwall.checks.experiments import mos_lm

        width = mos_lm.matched_width(64, 2)
        target = mos_lm.parameter_count(mos_lm.make_lm("mos", 64, mos_lm.WIDTH, 2, 0))
        assert mos_lm.parameter_count(mos_lm.make_lm("softmax", 64, width, 1, 0)) >= target
        narrower = width - mos_lm.HEADS_PER_BLOCK
        assert mos_lm.parameter_count(mos_lm.make_lm("softmax", 64, narrower, 1, 0)) < target

    def test_a_sweep_without_the_comparisons_k_is_refused(self, tmp_path, capsys):
        assert main(["experiment", "mos-lm", "--K", "1,2", "--out", str(tmp_path)]) == 2
        assert "--K: the sweep must include" in capsys.readouterr().err


TRAJECTORY = RECORDED / "attention_trajectory"


@pytest.mark.skipif(not TRAJECTORY.with_suffix(".json").exists(), reason="no recorded run")
def test_the_recorded_trajectory_is_read_from_its_records():
    """What the recorded JSON says about the training (the series, the commitment, the check totals) is
    re-derived here from the monitor's JSON Lines that ship with it."""
    from rankwall.checks.experiments.attention_trajectory import analysed
    from rankwall.monitor import read_run

    recorded = json.loads(TRAJECTORY.with_suffix(".json").read_text())
    again = json.loads(json.dumps(analysed(read_run(TRAJECTORY.with_suffix(".jsonl")))))
    assert {k: recorded[k] for k in again} == again


@pytest.mark.slow
@pytest.mark.parametrize("name", ["spamlang-generations", "efficiency-depth", "mos-lm"])
def test_the_recorded_run_is_reproduced(tmp_path, name, capsys):
    """The docs quote docs/_static/experiments/NAME.json: the same command gives the same losses up to
    float32 training noise across machines (2e-2 on losses of order 1 to 10)."""
    assert main(["experiment", name, "--out", str(tmp_path), "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    recorded = json.loads((RECORDED / f"{name.replace('-', '_')}.json").read_text())
    key = {"spamlang-generations": "final_loss", "mos-lm": "valid_loss"}.get(name)
    if key is None:
        losses = [[c["loss"] for c in r["checkpoints"]] for run in (fresh, recorded) for r in run["runs"]]
        half = len(losses) // 2
        assert np.allclose(losses[:half], losses[half:], atol=2e-2)
    else:
        assert np.allclose([r[key] for r in fresh["records"]], [r[key] for r in recorded["records"]], atol=2e-2)
