"""The attention-heads experiment: its interventions on a tiny random llama (no download), its
command line, and the recorded SmolLM2 run."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import EXIT_USAGE, main
from rankwall.checks.models import loading
from rankwall.theory.validation import InputError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
    reason="needs torch and transformers",
)
RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments" / "attention_heads.json"
LAYERS, HEADS, VOCABULARY = 2, 4, 64


@pytest.fixture(scope="module")
def tiny():
    """A randomly initialised llama: 2 layers, 4 heads sharing 2 key/value heads, eager attention."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCABULARY,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=2,
        attn_implementation="eager",
    )
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def windows():
    return np.random.default_rng(0).integers(VOCABULARY, size=(2, 25))


@contextlib.contextmanager
def forced_previous_token(layer: int, head: int):
    """The model's own attention softmax, with head ``head`` of layer ``layer`` made to attend to the
    previous token (the first query to itself): a head that already has the shift-by-one pattern."""
    import torch

    original = torch.nn.functional.softmax
    calls = itertools.count()

    def forcing(x, *args, **kwargs):
        out = original(x, *args, **kwargs)
        if x.ndim == 4 and next(calls) % LAYERS == layer:
            n = x.shape[-1]
            shift = torch.zeros(n, n, dtype=out.dtype)
            shift[0, 0] = 1
            shift[torch.arange(1, n), torch.arange(n - 1)] = 1
            out = out.clone()
            out[:, head] = shift
        return out

    torch.nn.functional.softmax = forcing
    try:
        yield
    finally:
        torch.nn.functional.softmax = original


@pytest.mark.parametrize(("layer", "head"), [(0, 1), (1, 2)])
def test_shift_on_a_previous_token_head_leaves_the_loss_unchanged(tiny, windows, layer, head):
    from rankwall.checks.experiments.attention_heads import intervention, token_losses

    with forced_previous_token(layer, head):
        before = token_losses(tiny, windows)
        with intervention(tiny, layer, head, "shift"):
            after = token_losses(tiny, windows)
    assert np.max(np.abs(after - before)) < 1e-5
    # The same replacement on the model's own (diffuse) pattern is a real change.
    with intervention(tiny, layer, head, "shift"):
        changed = token_losses(tiny, windows)
    assert np.max(np.abs(changed - token_losses(tiny, windows))) > 1e-4


def _without_head_columns(tiny, layer: int, head: int, bias=None):
    """A copy of the model whose o_proj ignores head ``head`` (its columns zeroed), plus ``bias``."""
    import copy

    import torch

    model = copy.deepcopy(tiny)
    o_proj = model.model.layers[layer].self_attn.o_proj
    d = model.model.layers[layer].self_attn.head_dim
    with torch.no_grad():
        o_proj.weight[:, head * d : (head + 1) * d] = 0
        if bias is not None:
            o_proj.bias = torch.nn.Parameter(bias)
    return model


def test_zero_ablation_is_dropping_the_heads_columns_of_o_proj(tiny, windows):
    from rankwall.checks.experiments.attention_heads import intervention, token_losses

    with intervention(tiny, 1, 3, "zero"):
        ablated = token_losses(tiny, windows)
    assert np.allclose(ablated, token_losses(_without_head_columns(tiny, 1, 3), windows), atol=1e-6)
    assert np.max(np.abs(ablated - token_losses(tiny, windows))) > 1e-4


def test_mean_ablation_is_a_constant_through_o_proj(tiny, windows):
    import torch

    from rankwall.checks.experiments.attention_heads import intervention, token_losses

    layer, head = 0, 2
    mean = torch.linspace(-1, 1, tiny.model.layers[layer].self_attn.head_dim)
    with intervention(tiny, layer, head, "mean", mean):
        replaced = token_losses(tiny, windows)
    d = tiny.model.layers[layer].self_attn.head_dim
    with torch.no_grad():
        bias = tiny.model.layers[layer].self_attn.o_proj.weight[:, head * d : (head + 1) * d] @ mean
    assert np.allclose(replaced, token_losses(_without_head_columns(tiny, layer, head, bias), windows), atol=1e-5)


def test_the_mean_output_is_the_heads_mean_over_positions(tiny, windows):
    import torch

    from rankwall.checks.experiments.attention_heads import head_statistics, intervention, token_losses

    stats = head_statistics(tiny, windows)
    assert stats["m"].shape == (LAYERS, HEADS, 2 * 24)
    # Mean-ablating with the recorded mean keeps the mean output of the layer's o_proj input.
    seen = []
    handle = tiny.model.layers[1].self_attn.o_proj.register_forward_pre_hook(lambda m, i: seen.append(i[0][0]))
    try:
        token_losses(tiny, windows)
        original = torch.cat(seen).mean(dim=0)
        seen.clear()
        with intervention(tiny, 1, 0, "mean", stats["mean_output"][1][0]):
            token_losses(tiny, windows)
    finally:
        handle.remove()
    assert torch.allclose(torch.cat(seen).mean(dim=0), original, atol=1e-6)


def test_score_gradients_obey_the_jacobian_bound(tiny, windows):
    from rankwall.checks.experiments.attention_heads import head_statistics, head_table

    table = head_table(head_statistics(tiny, windows))
    assert len(table) == LAYERS * HEADS
    for h in table:
        assert 0 < h["grad_scores_norm"] <= h["grad_scores_bound"] * (1 + 1e-5)
        low, high = h["median_jacobian_range"]
        assert 0 < low <= high == pytest.approx(2 * low) and h["jacobian_bound_violations"] == 0


def test_choose_heads_ranks_by_confidence_times_previous_share():
    from rankwall.checks.experiments.attention_heads import choose_heads

    table = [
        {"layer": 0, "head": h, "median_m": m, "previous_token_share": s}
        for h, (m, s) in enumerate([(0.9, 0.9), (0.99, 0.1), (0.6, 0.95), (0.3, 0.1), (0.2, 0.05), (0.5, 0.5)])
    ]
    chosen, baseline = choose_heads(table, 2, seed=0)
    assert [h["head"] for h in chosen] == [0, 2]
    assert baseline["head"] in (3, 4)
    assert {choose_heads(table, 2, seed=s)[1]["head"] for s in range(20)} == {3, 4}
    with pytest.raises(InputError, match="--heads"):
        choose_heads(table, 6, seed=0)


def test_bad_input_names_its_argument(tiny, windows):
    import copy

    from rankwall.checks.experiments.attention_heads import head_statistics, intervention, split_windows

    with pytest.raises(InputError, match="intervention"), intervention(tiny, 0, 0, "swap"):
        pass
    with pytest.raises(InputError, match="head"), intervention(tiny, 0, HEADS, "zero"):
        pass
    with pytest.raises(InputError, match="--windows"):
        split_windows(np.arange(10), 2, 8)
    sdpa = copy.deepcopy(tiny)
    sdpa.config._attn_implementation = "sdpa"
    with pytest.raises(InputError, match="eager"):
        head_statistics(sdpa, windows)


class _Characters:
    """A stand-in tokenizer: one id per character, modulo the vocabulary."""

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % VOCABULARY for c in text]}


def test_run_and_write_on_the_tiny_model(tiny, tmp_path):
    from rankwall.checks.experiments import attention_heads

    loaded = loading.LoadedModel(tiny, _Characters(), loading.ModelSource(tmp_path, None, "tiny llama"))
    calls = []
    record = attention_heads.run(loaded, windows=2, context=16, heads=2, on_step=lambda: calls.append(1))
    assert len(calls) == attention_heads.steps(2) and record["tokens"] == 32
    assert [h["role"] for h in record["chosen"]] == ["chosen", "chosen"] and record["baseline"]["role"] == "baseline"
    chosen = {(h["layer"], h["head"]) for h in record["chosen"]}
    assert (record["baseline"]["layer"], record["baseline"]["head"]) not in chosen
    json_path, png_path = attention_heads.write(record, tmp_path)
    assert json.loads(json_path.read_text())["loss"] == record["loss"] and png_path.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--windows", "0"], "--windows: 0 is out of range"),
        (["--context", "1"], "--context: 1 is out of range"),
        (["--heads", "x"], "--heads: expected an integer"),
        (["--interventions"], "unrecognized arguments"),
    ],
)
def test_bad_flags_exit_two(capsys, tmp_path, flags, message):
    assert main(["experiment", "attention-heads", "--out", str(tmp_path), *flags]) == EXIT_USAGE
    assert message in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None, reason=loading.INSTALL_HINT)
def test_the_recorded_run_is_reproduced(tmp_path, capsys):
    """The docs quote docs/_static/experiments/attention_heads.json: the same heads are chosen and the
    loss changes agree up to float32 noise across machines."""
    assert main(["experiment", "attention-heads", "--out", str(tmp_path), "--json"]) == 0
    fresh = json.loads(capsys.readouterr().out)
    recorded = json.loads(RECORDED.read_text())
    heads = [[(h["layer"], h["head"]) for h in [*r["chosen"], r["baseline"]]] for r in (fresh, recorded)]
    assert heads[0] == heads[1]
    assert fresh["loss"] == pytest.approx(recorded["loss"], abs=1e-4)
    for new, old in zip(
        [*fresh["chosen"], fresh["baseline"]], [*recorded["chosen"], recorded["baseline"]], strict=True
    ):
        for kind, change in old["interventions"].items():
            assert new["interventions"][kind]["loss_change"] == pytest.approx(change["loss_change"], abs=1e-3)
