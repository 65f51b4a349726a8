"""rankwall.monitor: the per-row measures against slow references, the checks' margins against the real
float32 errors, planted faults the checks must catch, attaching without changing the model or its
training, the LM head's Eq. 1, the JSON Lines contract, TensorBoard, Hugging Face eager attention, and
``rankwall monitor report``."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.theory.validation import InputError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
F32 = (2.0**-24, 2.0**-126)  # float32's unit roundoff and smallest normal number


def tiny_model(seed: int = 0, V: int = 17, layers: int = 2, heads: int = 2, context: int = 8):
    from rankwall.checks.models import tiny

    return tiny.make_tiny(tiny.TinyConfig(V=V, width=16, layers=layers, heads=heads, context=context), seed)


def batch(V: int = 17, B: int = 3, T: int = 8, seed: int = 1):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(V, (B, T + 1), generator=g)
    return x[:, :-1], x[:, 1:]


def softmax_rows_with_gradients(R: int, K: int, seed: int, spread: float = 3.0, masked: bool = True):
    """Random float32 attention rows (causal masks if ``masked``) with their autograd gradients: a
    random incoming gradient g_p and the g_z = J(p) g_p autograd forms, all as NumPy arrays."""
    import torch

    g = torch.Generator().manual_seed(seed)
    z = (spread * torch.randn(R, K, generator=g)).requires_grad_()
    position = torch.arange(R) % K
    scores = z + (torch.where(torch.arange(K)[None, :] > position[:, None], float("-inf"), 0.0) if masked else 0)
    scores.retain_grad()
    p = torch.softmax(scores, dim=-1)
    p.retain_grad()
    incoming = torch.randn(R, K, generator=g)
    (p * incoming).sum().backward()
    return [t.detach().numpy() for t in (scores, p, p.grad, scores.grad)] + [position.numpy()]


class TestTheRowMeasures:
    """Each per-row quantity against a slow, obviously right computation at small size."""

    def test_norm_and_gain_against_dense_eigenvalues(self):
        from rankwall.monitor import check_attention_rows

        z, p, g_p, g_z, position = softmax_rows_with_gradients(40, 9, seed=0)
        rows = check_attention_rows(z, p, g_p, g_z, position, *F32)
        for i in range(40):
            finite = np.isfinite(z[i])
            q = np.exp(z[i][finite].astype(np.float64) - z[i][finite].max())
            q /= q.sum()
            dense = np.linalg.eigvalsh(np.diag(q) - np.outer(q, q))
            assert rows.norm_J[i] == pytest.approx(max(dense.max(), 0.0), abs=1e-14), i
            assert rows.m[i] == pytest.approx(q.max(), rel=1e-14), i
            gain = np.linalg.norm(g_z[i].astype(np.float64)) / np.linalg.norm(g_p[i].astype(np.float64))
            assert rows.gain[i] == pytest.approx(gain, rel=1e-14), i
            assert rows.previous[i] == (position[i] >= 1 and np.argmax(q) == position[i] - 1), i

    @pytest.mark.parametrize("spread", [0.1, 3.0, 30.0])
    def test_genuine_rows_are_never_violated(self, spread):
        """Every check holds on every row, except the gain of rows so close to one-hot that float32
        autograd's logit gradient is within its own rounding (capacity 2m(1 - m) below 1e-4): there it is
        undecided, never violated."""
        from rankwall.monitor import CHECKS, check_attention_rows

        z, p, g_p, g_z, position = softmax_rows_with_gradients(256, 16, seed=1, spread=spread)
        rows = check_attention_rows(z, p, g_p, g_z, position, *F32)
        for check in CHECKS:
            assert (rows.verdicts[check] >= 0).all(), (check, np.unique(rows.verdicts[check]))
        assert (rows.verdicts["jacobian_bounds"] == 1).all() and (rows.verdicts["row_sums_zero"] == 1).all()
        undecided = rows.verdicts["gain_within_norm"] == 0
        assert (rows.capacity[undecided] < 1e-4).all() and (undecided.sum() == 0) == (spread < 30)

    def test_rows_of_one_and_two_atoms_are_decided_by_structure(self):
        """The first causal row (one key: J = 0) and the second (two keys: ||J|| = 2m(1 - m) exactly)."""
        from rankwall.monitor import check_attention_rows

        z, p, g_p, g_z, position = softmax_rows_with_gradients(2, 8, seed=2)
        rows = check_attention_rows(z, p, g_p, g_z, position, *F32)
        assert rows.norm_J[0] == 0 and rows.capacity[0] == 0
        assert rows.norm_J[1] == pytest.approx(rows.capacity[1], rel=1e-15)
        # row 1 sits on its upper bound to the last bit: only the two-atom lemma can say "holds" there
        assert (rows.verdicts["jacobian_bounds"] == 1).all() and np.isinf(rows.closeness["jacobian_bounds"][0])


class TestTheMarginsAreSound:
    """The rounding bound of autograd's float32 logit gradient holds on real rows and is not vacuous."""

    @pytest.mark.parametrize("spread", [0.5, 5.0, 40.0])
    def test_the_bound_covers_the_float32_error(self, spread):
        from rankwall.checks.engine import tolerance
        from rankwall.monitor import _shifted_logits

        z, _, g_p, g_z, _ = softmax_rows_with_gradients(512, 32, seed=3, spread=spread, masked=False)
        x = _shifted_logits(z)
        q = np.exp(x)
        q /= q.sum(axis=1, keepdims=True)
        g = g_p.astype(np.float64)
        exact = q * (g - np.sum(q * g, axis=1, keepdims=True))
        error = np.abs(g_z - exact)
        bound = tolerance.softmax_gradient_error(q, x, g, *F32)
        assert (error <= bound).all()
        # not vacuous where the row is not near one-hot: a few hundred float32 roundings of the gradient
        m = q.max(axis=1)
        spread_rows = 2 * m * (1 - m) > 1e-2
        ratio = np.linalg.norm(bound, axis=1) / np.linalg.norm(exact, axis=1)
        assert spread_rows.sum() >= 10 and np.median(ratio[spread_rows]) < 1e-4


class TestPlantedFaults:
    """Something between the softmax and the loss that is not a softmax is caught."""

    def test_a_scaled_logit_gradient_breaks_the_gain_bound(self):
        from rankwall.monitor import check_attention_rows

        z, p, g_p, g_z, position = softmax_rows_with_gradients(64, 16, seed=4)
        rows = check_attention_rows(z, p, g_p, 100 * g_z, position, *F32)
        assert (rows.verdicts["gain_within_norm"] == -1).sum() > 32

    def test_a_shifted_logit_gradient_breaks_the_row_sums(self):
        from rankwall.monitor import check_attention_rows

        z, p, g_p, g_z, position = softmax_rows_with_gradients(64, 16, seed=5)
        scale = (p * np.abs(g_p)).sum(axis=1, keepdims=True)  # the incoming gradient's size on the row
        rows = check_attention_rows(z, p, g_p, g_z + 1e-3 * scale.astype(np.float32), position, *F32)
        assert (rows.verdicts["row_sums_zero"] == -1).all()

    def test_a_norm_past_the_bound_is_violated_never_held(self, monkeypatch):
        from rankwall import monitor
        from rankwall.theory import softmax_jacobian as sj

        z, p, g_p, g_z, position = softmax_rows_with_gradients(64, 16, seed=6)
        monkeypatch.setattr(sj, "spectral_norm", lambda q: 2.01 * np.asarray(sj.upper_bound(q)) / 2)
        rows = monitor.check_attention_rows(z, p, g_p, g_z, position, *F32)
        wide = np.sum(np.isfinite(z), axis=1) >= 3
        assert (rows.verdicts["jacobian_bounds"][wide] == -1).all()

    def test_a_rescaled_score_gradient_in_a_model_is_counted(self):
        """A model whose attention scores' gradient is rescaled before it reaches them (a tensor hook,
        as a gradient-scaling trick would): the monitor's gain check sees it."""
        import torch
        from torch import nn

        from rankwall.monitor import Monitor

        class Planted(nn.Module):
            def __init__(self, factor: float) -> None:
                super().__init__()
                self.factor = factor
                self.key = nn.Linear(4, 4, bias=False)

            def forward(self, x):
                scores = (x @ self.key(x).transpose(-2, -1))[:, None]  # (batch, 1 head, T, T)
                if self.factor != 1:
                    scores.register_hook(lambda g: self.factor * g)
                return (torch.softmax(scores, dim=-1) @ x[:, None]).square().sum()

        x = torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(0))
        counts = []
        for factor in (1, 1e3):
            model = Planted(factor)
            torch.manual_seed(0)
            nn.init.normal_(model.key.weight)
            with Monitor(model, every=1, lm_head=None) as monitor, monitor.step(0):
                model(x).backward()
            counts.append(monitor.records[0]["checks"]["gain_within_norm"]["violated"])
        assert counts[0] == 0 and counts[1] > 0


class TestAttaching:
    def test_training_is_bit_identical_with_and_without_the_monitor(self):
        import torch

        from rankwall.monitor import Monitor

        def train(monitored: bool) -> list:
            model = tiny_model()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
            monitor = Monitor(model, every=1, lm_head=model.head).attach() if monitored else None
            for step in range(3):
                x, y = batch(seed=step)
                with monitor.step(step) if monitored else torch.enable_grad():
                    torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
                optimizer.step()
                optimizer.zero_grad()
            if monitored:
                monitor.detach()
                assert len(monitor.records) == 3
            return [p.detach().clone() for p in model.parameters()]

        for a, b in zip(train(False), train(True), strict=True):
            assert torch.equal(a, b)

    def test_attaching_and_detaching_leave_the_model_unchanged(self):
        import torch

        from rankwall.monitor import Monitor

        model = tiny_model()
        before = {k: v.clone() for k, v in model.state_dict().items()}
        x, y = batch()
        with Monitor(model, every=1) as monitor:
            with monitor.step(0):
                torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
            assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
        after = model.state_dict()
        assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
        assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())

    def test_a_step_that_does_not_record_sees_nothing(self):
        import torch

        from rankwall.monitor import Monitor

        model = tiny_model()
        x, y = batch()
        with Monitor(model, every=5) as monitor:
            for step in (1, 2):
                with monitor.step(step) as log:
                    assert not log.recording
                    torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten()).backward()
        assert monitor.records == []

    @pytest.mark.parametrize(
        ("kwargs", "message"),
        [
            ({"every": 0}, "every: 0 is out of range"),
            ({"sample": -1}, "sample: -1 is out of range"),
            ({"max_rows": 0}, "max_rows: 0 is out of range"),
            ({"lm_head": "head"}, "lm_head: expected a module"),
        ],
    )
    def test_bad_arguments_are_refused_by_name(self, kwargs, message):
        from rankwall.monitor import Monitor

        with pytest.raises(InputError, match=message):
            Monitor(tiny_model(), **kwargs)

    def test_a_step_outside_attach_is_refused(self):
        from rankwall.monitor import Monitor

        with pytest.raises(InputError, match="not attached"), Monitor(tiny_model()).step(0):
            pass


class TestTheRecord:
    @pytest.fixture(scope="class")
    @classmethod
    def recorded(cls, tmp_path_factory):
        import torch

        from rankwall.monitor import Monitor

        path = tmp_path_factory.mktemp("run") / "run.jsonl"
        model = tiny_model(layers=2, heads=2)
        x, y = batch(B=3, T=8)
        scores = []
        original = torch.softmax

        def keep(z, dim):
            z.retain_grad()
            p = original(z, dim=dim)
            p.retain_grad()
            scores.append((z, p))
            return p

        with Monitor(model, every=1, path=path, sample=5) as monitor:
            for step in range(2):
                scores.clear()
                with monitor.step(step) as log:
                    torch.softmax = keep
                    try:
                        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
                    finally:
                        torch.softmax = original
                    loss.backward()
                    log.log(loss=loss.item())
                model.zero_grad()
        return monitor.records, path, scores

    def test_one_entry_per_layer_and_head_with_every_row(self, recorded):
        records, _, _ = recorded
        heads = records[-1]["attention"]["heads"]
        assert [(h["layer"], h["head"]) for h in heads] == [(0, 0), (0, 1), (1, 0), (1, 1)]
        assert [h["module"] for h in heads] == ["blocks.0.attention"] * 2 + ["blocks.1.attention"] * 2
        assert all(h["rows"] == 3 * 8 for h in heads) and records[-1]["attention"]["rows"] == 4 * 24
        assert all(len(h["sample"]["gain"]) == 5 for h in heads)
        assert records[-1]["scalars"]["loss"] > 0 and records[-1]["violations"] == 0

    def test_head_numbers_against_autograd_directly(self, recorded):
        """The median m and median gain of each head, from the model's own retained gradients."""
        records, _, scores = recorded
        for layer, (z, p) in enumerate(scores):
            for head in range(2):
                probabilities = p[:, head].detach().double().numpy().reshape(-1, 8)
                gain = np.linalg.norm(z.grad[:, head].double().numpy().reshape(-1, 8), axis=1) / np.linalg.norm(
                    p.grad[:, head].double().numpy().reshape(-1, 8), axis=1
                )
                entry = records[-1]["attention"]["heads"][2 * layer + head]
                assert entry["median_m"] == pytest.approx(np.median(probabilities.max(axis=1)), rel=1e-6)
                assert entry["median_gain"] == pytest.approx(np.median(gain), rel=1e-12)

    def test_the_pooled_fit_is_least_squares_over_every_row(self, recorded):
        from rankwall.monitor import fit_from_sums

        records, _, scores = recorded
        x, y = [], []
        for z, p in scores:
            q = p.detach().double().numpy().reshape(-1, 8)
            m = q.max(axis=1)
            gain = np.linalg.norm(z.grad.double().numpy().reshape(-1, 8), axis=1) / np.linalg.norm(
                p.grad.double().numpy().reshape(-1, 8), axis=1
            )
            usable = (m < 1) & (gain > 0)
            x.append(np.log(2 * m[usable] * (1 - m[usable])))
            y.append(np.log(gain[usable]))
        slope, intercept = np.polyfit(np.concatenate(x), np.concatenate(y), 1)
        fit = fit_from_sums(h["fit"] for h in records[-1]["attention"]["heads"])
        assert fit["slope"] == pytest.approx(slope, rel=1e-5) and fit["constant"] == pytest.approx(
            np.exp(intercept), rel=1e-5
        )

    def test_the_json_lines_round_trip(self, recorded):
        from rankwall.monitor import SCHEMA, read_run

        records, path, _ = recorded
        assert read_run(path) == json.loads(json.dumps(records)) and all(r["schema"] == SCHEMA for r in records)

    def test_the_lm_head_record_is_eq1_of_the_logit_gradient(self, recorded):
        records, _, _ = recorded
        lm = records[-1]["lm_head"]
        assert lm["module"] == "head" and (lm["V"], lm["D"], lm["rank_W"]) == (17, 16, 16)
        assert lm["destroyed"] ** 2 + lm["cosine"] ** 2 == pytest.approx(1, abs=1e-12)
        assert 0 < lm["gradient_rank_lower"] <= lm["gradient_rank_upper"] == 17


class TestTheLMHead:
    def test_shares_against_a_dense_projector(self):
        from rankwall.monitor import lm_head_record

        rng = np.random.default_rng(0)
        W, G = rng.standard_normal((30, 5)), rng.standard_normal((12, 30))
        projector = W @ np.linalg.pinv(W)
        record = lm_head_record(G, W)
        destroyed = np.linalg.norm(G - G @ projector) / np.linalg.norm(G)
        assert record["destroyed"] == pytest.approx(destroyed, rel=1e-12) and record["rank_W"] == 5
        assert record["gradient_rank_lower"] == np.linalg.matrix_rank(G) == 12

    def test_a_head_wider_than_the_vocabulary_destroys_nothing(self):
        from rankwall.monitor import lm_head_record

        rng = np.random.default_rng(1)
        record = lm_head_record(rng.standard_normal((6, 10)), rng.standard_normal((10, 40)))
        assert record["rank_W"] == 10 and record["destroyed"] < 1e-14 and record["cosine"] == pytest.approx(1)

    def test_a_rank_deficient_wide_head_keeps_its_rank(self):
        from rankwall.monitor import lm_head_record

        rng = np.random.default_rng(2)
        W = rng.standard_normal((10, 3)) @ rng.standard_normal((3, 40))
        G = rng.standard_normal((6, 10))
        record = lm_head_record(G, W)
        projector = W @ np.linalg.pinv(W)
        assert record["rank_W"] == 3
        assert record["destroyed"] == pytest.approx(np.linalg.norm(G - G @ projector) / np.linalg.norm(G), rel=1e-10)


class TestRuns:
    @pytest.mark.parametrize(
        ("line", "message"),
        [("{not json", "line 1 is not JSON"), ('{"schema": "other"}', "line 1 is not a rankwall.monitor/1 record")],
    )
    def test_a_bad_line_is_named(self, tmp_path, line, message):
        from rankwall.monitor import read_run

        path = tmp_path / "run.jsonl"
        path.write_text(line + "\n")
        with pytest.raises(InputError, match=message):
            read_run(path)

    def test_an_empty_file_is_refused(self, tmp_path):
        from rankwall.monitor import read_run

        (tmp_path / "run.jsonl").write_text("\n")
        with pytest.raises(InputError, match="holds no record"):
            read_run(tmp_path / "run.jsonl")


@pytest.fixture(scope="module")
def run_file(tmp_path_factory):
    import torch

    from rankwall.monitor import Monitor

    path = tmp_path_factory.mktemp("report") / "run.jsonl"
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with Monitor(model, every=2, path=path) as monitor:
        for step in range(5):
            x, y = batch(seed=step)
            with monitor.step(step) as log:
                loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
                loss.backward()
                log.log(loss=loss.item())
            optimizer.step()
            optimizer.zero_grad()
    return path


class TestTheReportCommand:
    def test_a_clean_run_exits_0_and_writes_its_figures(self, run_file, tmp_path, capsys):
        assert main(["monitor", "report", str(run_file), "--out", str(tmp_path), "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["steps"] == [0, 2, 4] and summary["violations"] == 0
        assert len(summary["heads"]) == 4 and all(h["steps"] == [0, 2, 4] for h in summary["heads"])
        assert summary["fit_all_rows"]["rows"] == sum(
            h["fit"]["n"] for line in run_file.read_text().splitlines() for h in json.loads(line)["attention"]["heads"]
        )
        for name in ("report.json", "trajectories.png", "gain_vs_capacity.png"):
            assert (tmp_path / name).stat().st_size > 0

    @pytest.mark.parametrize(("key", "code"), [("violated", 1), ("undecided", 3)])
    def test_a_violated_or_undecided_row_sets_the_exit_code(self, run_file, key, code):
        from rankwall.checks.cli.commands.monitor import exit_code
        from rankwall.checks.models import monitor_report
        from rankwall.monitor import read_run

        records = read_run(run_file)
        assert exit_code(monitor_report.summarise(records)) == 0
        records[1]["checks"]["row_sums_zero"][key] += 1
        records[1]["violations" if key == "violated" else "undecided"] += 1
        summary = monitor_report.summarise(records)
        assert summary["checks"]["row_sums_zero"][key] == 1 and exit_code(summary) == code

    def test_a_missing_run_is_a_usage_error(self, tmp_path, capsys):
        assert main(["monitor", "report", str(tmp_path / "none.jsonl"), "--out", str(tmp_path)]) == 2
        assert "RUN.jsonl:" in capsys.readouterr().err

    def test_the_figures_are_legible(self, run_file):
        from unittest import mock

        import matplotlib.pyplot as plt

        from rankwall.checks.models import monitor_report
        from rankwall.checks.run.outputs import layout_problems
        from rankwall.monitor import read_run

        records = read_run(run_file)
        summary = monitor_report.summarise(records)
        figures = []
        with (
            mock.patch.object(plt.Figure, "savefig", lambda self, *a, **k: figures.append(self)),
            mock.patch.object(plt, "close", lambda *a: None),
        ):
            monitor_report.plot_trajectories(summary, None)
            monitor_report.plot_gain(records, summary, None)
        assert [layout_problems(f) for f in figures] == [[], []]


@pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="needs tensorboard (pip install tensorboard)"
)
def test_tensorboard_receives_the_scalars(tmp_path):
    import torch
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rankwall.monitor import Monitor

    model = tiny_model()
    x, y = batch()
    with Monitor(model, every=1, tensorboard=tmp_path) as monitor, monitor.step(0) as log:
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        log.log(loss=loss.item())
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"attention/layer0.head0/median_m", "lm_head/destroyed", "checks/violations", "scalars/loss"} <= tags
    [value] = events.Scalars("attention/layer1.head1/median_gain")
    assert value.value == pytest.approx(monitor.records[0]["attention"]["heads"][3]["median_gain"], rel=1e-6)


class TestHuggingFace:
    """A Hugging Face model with eager attention exposes its probabilities; with SDPA it does not."""

    @staticmethod
    def llama(implementation: str):
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        config = LlamaConfig(
            vocab_size=64,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            tie_word_embeddings=True,
            attn_implementation=implementation,
        )
        return LlamaForCausalLM(config)

    @pytest.mark.parametrize("implementation", ["eager", "sdpa"])
    def test_heads_are_seen_with_eager_attention_only(self, implementation):
        import torch

        from rankwall.monitor import Monitor

        model = self.llama(implementation)
        ids = torch.randint(64, (2, 12), generator=torch.Generator().manual_seed(0))
        with Monitor(model, every=1) as monitor, monitor.step(0):
            model(input_ids=ids, labels=ids).loss.backward()
        record = monitor.records[0]
        assert record["lm_head"]["module"] == "lm_head" and record["lm_head"]["V"] == 64
        if implementation == "eager":
            assert len(record["attention"]["heads"]) == 8 and record["violations"] == 0
            assert record["attention"]["heads"][0]["module"] == "model.layers.0.self_attn"
        else:
            assert record["attention"]["heads"] == [] and record["attention"]["fused_attention_calls"] == 2
