"""Seed 002's model trained afresh and monitored (``rankwall experiment attention-trajectory``): the model,
the reading of a trajectory, the interventions, the run's contract at a small size, and the recorded run."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments"


def test_the_model_has_the_seeds_parameter_count():
    """Seed 002, "Data": 816,128 parameters, four blocks, four heads, width 128, context 64, V = 65."""
    from rankwall.checks.models import tiny

    config = tiny.TinyConfig(V=65)
    model = tiny.make_tiny(config)
    assert sum(p.numel() for p in model.parameters()) == tiny.parameter_count(config) == tiny.SEED_PARAMETERS
    assert (len(model.blocks), model.blocks[0].attention.heads, config.width, config.context) == (4, 4, 128, 64)


class TestInterventions:
    """Each intervention against the head's output computed by hand."""

    @staticmethod
    def parts(kind: str, head: int = 1):
        import torch

        from rankwall.checks.models import tiny

        model = tiny.make_tiny(tiny.TinyConfig(V=11, width=8, layers=1, heads=2, context=6), seed=3)
        attention = model.blocks[0].attention
        x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(0))
        with torch.no_grad(), attention.intervene(head, kind):
            out = attention(x)
        q, k, v = attention.qkv(x).view(2, 6, 3, 2, 4).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-2, -1) / 2 + attention.mask[:6, :6], dim=-1)
        return attention, out, p, v

    def test_zero_removes_the_heads_output_only(self):
        import torch

        attention, out, p, v = self.parts("zero")
        y = p @ v
        y[:, 1] = 0
        expected = attention.out(y.transpose(1, 2).reshape(2, 6, 8))
        assert torch.allclose(out, expected, atol=1e-6)

    def test_shift_reads_the_previous_value(self):
        import torch

        attention, out, p, v = self.parts("shift")
        y = p @ v
        y[:, 1] = torch.cat([v[:, 1, :1], v[:, 1, :-1]], dim=1)
        expected = attention.out(y.transpose(1, 2).reshape(2, 6, 8))
        assert torch.allclose(out, expected, atol=1e-6)
        assert attention.interventions == {}  # undone on leaving the block

    def test_a_bad_intervention_is_refused(self):
        from rankwall.checks.models import tiny
        from rankwall.theory.validation import InputError

        attention = tiny.make_tiny(tiny.TinyConfig(V=5, width=4, layers=1, heads=2, context=4)).blocks[0].attention
        with pytest.raises(InputError, match="head: 2 is out of range"), attention.intervene(2, "zero"):
            pass
        with pytest.raises(InputError, match="intervention: 'mean'"), attention.intervene(0, "mean"):
            pass


def synthetic_trajectory() -> dict:
    """Eleven records, 40 steps apart: head 0.1 crosses from 0.22 (step 120) to 0.92 (step 240) and
    stays within 0.01 of its final 0.96 from step 280; its gain peaks at step 120; head 0.0 finds the
    same rule and stops at 0.7; head 1.0 is confident but attends elsewhere."""
    steps = list(range(0, 440, 40))
    return {
        "steps": steps,
        "loss": [3.0 - 0.1 * i for i in range(11)],
        "valid_loss": [3.1 - 0.1 * i for i in range(11)],
        "heads": {
            "0.1": {
                "median_m": [0.05, 0.07, 0.1, 0.22, 0.5, 0.85, 0.92, 0.951, 0.955, 0.958, 0.96],
                "median_gain": [0.01, 0.02, 0.03, 0.04, 0.03, 0.01, 0.006, 0.004, 0.004, 0.003, 0.003],
                "previous": [0.1, 0.2, 0.3, 0.5, 0.8, 0.95, 0.99, 1.0, 1.0, 1.0, 1.0],
            },
            "0.0": {
                "median_m": [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.68, 0.7, 0.7],
                "median_gain": [0.01, 0.02, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03, 0.03],
                "previous": [0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.92, 0.95, 0.97, 0.98, 0.99],
            },
            "1.0": {
                "median_m": [0.05, 0.3, 0.6, 0.9, 0.97, 0.98, 0.98, 0.98, 0.98, 0.98, 0.98],
                "median_gain": [0.01] * 11,
                "previous": [0.05] * 11,
            },
        },
    }


class TestReadingATrajectory:
    def test_the_window_peak_hold_and_control(self):
        from rankwall.checks.experiments.attention_trajectory import commitment

        c = commitment(synthetic_trajectory())
        assert (c["head"], c["previous_token_head"], c["committed"]) == ("0.1", True, True)
        assert c["window"] == [120, 240] and c["m_at_window"] == [0.22, 0.92]
        assert (c["peak_step"], c["peak_gain"], c["m_at_peak"]) == (120, 0.04, 0.22)
        assert (c["hold_from"], c["hold_steps"]) == (280, 120)
        assert c["valid_loss_over_hold"] == pytest.approx([2.4, 2.1])
        control = c["control"]
        assert (control["head"], control["found_the_same_rule"], control["final_m"]) == ("0.0", True, 0.7)
        assert control["previous_over_hold"] == [0.95, 0.99]
        assert control["final_gain_over_committed"] == pytest.approx(10)

    def test_without_a_previous_token_head_the_most_confident_is_taken(self):
        from rankwall.checks.experiments.attention_trajectory import choose_heads

        assert choose_heads({"0.0": (0.7, 0.1), "1.0": (0.9, 0.2), "2.0": (0.5, 0.3)}) == ("1.0", "2.0")
        assert choose_heads({"0.0": (0.7, 0.9), "1.0": (0.9, 0.2), "2.0": (0.5, 0.6)}) == ("0.0", "2.0")

    def test_a_head_that_never_reaches_0_9_has_no_commit_step(self):
        from rankwall.checks.experiments.attention_trajectory import commitment

        t = synthetic_trajectory()
        t["heads"]["0.1"]["median_m"] = [min(m, 0.8) for m in t["heads"]["0.1"]["median_m"]]
        c = commitment(t)
        assert c["committed"] is False and c["window"] == [120, None]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    from rankwall.checks.experiments import attention_trajectory as at

    out = tmp_path_factory.mktemp("trajectory")
    sizes = {"sequences": 4, "draws": 2, "count": 1, "size": 2}
    return out, at.run(out, steps=4, every=2, static_sizes=sizes)


class TestTheRunsContract:
    def test_records_at_every_and_the_last_step(self, small_run):
        out, result = small_run
        assert result["trajectory"]["steps"] == [0, 2, 4] and result["parameters"] == 816128
        lines = [json.loads(line) for line in (out / "attention_trajectory.jsonl").read_text().splitlines()]
        assert [r["step"] for r in lines] == [0, 2, 4] and all(len(r["attention"]["heads"]) == 16 for r in lines)
        assert result["monitor"]["violations"] == 0 and result["final"]["violations"] == 0
        assert result["final"]["rows"] == 4 * 64 * 16

    def test_the_weights_and_their_hash_reproduce_the_model(self, small_run):
        from rankwall.checks.experiments import attention_trajectory as at

        out, result = small_run
        path = out / result["weights"]["file"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == result["weights"]["sha256"]
        model, _ = at.load_weights(path, 65, expected=result["weights"]["sha256"])
        with at.threads():
            again = at.static(model, at.corpus()[1], 0, sequences=4, draws=2, count=1, size=2)
        assert again["fit"] == result["final"]["fit"] and again["ablations"] == result["final"]["ablations"]

    def test_a_wrong_hash_is_refused(self, small_run):
        from rankwall.checks.experiments import attention_trajectory as at
        from rankwall.theory.validation import InputError

        out, result = small_run
        with pytest.raises(InputError, match=r"--weights: .* has sha256"):
            at.load_weights(out / result["weights"]["file"], 65, expected="0" * 64)

    def test_the_cli_surveys_saved_weights_without_training(self, small_run, tmp_path, capsys):
        out, result = small_run
        weights = str(out / result["weights"]["file"])
        argv = [
            "experiment",
            "attention-trajectory",
            "--weights",
            weights,
            "--survey",
            "4",
            "--draws",
            "2",
            "--count",
            "1",
        ]
        assert main([*argv, "--out", str(tmp_path), "--json"]) == 0
        surveyed = json.loads(capsys.readouterr().out)
        assert "trajectory" not in surveyed and surveyed["weights"]["sha256"] == result["weights"]["sha256"]
        assert (tmp_path / "attention_trajectory.png").is_file()


RECORDED_JSON = RECORDED / "attention_trajectory.json"


@pytest.mark.skipif(not RECORDED_JSON.exists(), reason="no recorded run")
def test_the_recorded_weights_are_the_recorded_runs():
    """The shipped weights hash to the recorded sha256, and a small survey of them finds the same
    committed and control heads as the recorded run's last record."""
    from rankwall.checks.experiments import attention_trajectory as at

    recorded = json.loads(RECORDED_JSON.read_text())
    path = RECORDED / recorded["weights"]["file"]
    model, _ = at.load_weights(path, recorded["V"], expected=recorded["weights"]["sha256"])
    with at.threads():
        record = at.survey(model, at.corpus()[1], 0, sequences=8)
    final = {
        f"{h['layer']}.{h['head']}": (h["median_m"], h["previous_token_share"]) for h in record["attention"]["heads"]
    }
    assert at.choose_heads(final)[0] == recorded["commitment"]["head"] and record["violations"] == 0


@pytest.mark.slow
def test_the_recorded_run_is_reproduced(tmp_path, capsys):
    """The docs quote docs/_static/experiments/attention_trajectory.json: the same command gives the same
    losses up to float32 training noise across machines (2e-2 on losses of order 2) and the same heads."""
    assert main(["experiment", "attention-trajectory", "--out", str(tmp_path), "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    recorded = json.loads(RECORDED_JSON.read_text())
    assert np.allclose(fresh["trajectory"]["valid_loss"], recorded["trajectory"]["valid_loss"], atol=2e-2)
    assert fresh["commitment"]["head"] == recorded["commitment"]["head"]
    assert fresh["monitor"]["violations"] == 0
