"""Sign agreement of the logit gradient with its projection on col W (seed 000, Figure 5): the
statistics on synthetic heads, a toy run through a tiny random llama, and the recorded SmolLM2 run."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.checks.experiments import sign_agreement as sa
from rankwall.checks.models import loading
from rankwall.theory import compression as cp
from rankwall.theory.validation import InputError

RECORDED = Path(__file__).resolve().parents[1] / "docs" / "_static" / "experiments" / "sign_agreement.json"


def synthetic(V: int = 400, D: int = 12, tokens: int = 300, seed: int = 0) -> dict:
    """Both summaries for a random head and Zipfian targets, projected on its own col W and on
    another random head's."""
    W = cp.construct_head(V, D, seed)
    H, targets = cp.construct_batch(tokens, D, V, seed + 1, scale=3.0)
    bases = {"own": cp.column_basis(W)[0], "other": cp.column_basis(cp.construct_head(V, D, seed + 2))[0]}
    return sa.sign_agreement(H, W, targets, bases, top_k=(5, 20))


def shares(summary: dict) -> list[float]:
    """Every share of a summary (each must lie in [0, 1])."""
    values = [summary["target_sign_agreement"], summary["tail_sign_agreement"], summary["kept_norm"]]
    values += list(summary["top_k_sign_agreement"].values())
    for key, value in summary.items():
        if key.endswith(("_share", "_share_squared")):
            values += list(value.values())
    return values


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shares_lie_in_the_unit_interval_and_add_up(seed):
    for summary in synthetic(seed=seed).values():
        assert all(0 <= x <= 1 for x in shares(summary))
        for when in ("before", "after"):
            total = sum(
                summary[k][when] for k in ("target_share_squared", "top_20_share_squared", "tail_share_squared")
            )
            assert total == pytest.approx(1, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_two_bounds_on_the_target_share_hold(seed):
    """g_t^2 >= ||g||^2 / 2 before the projection, |(g Π)_t| <= ||Q_t|| ||g Π|| after it."""
    for summary in synthetic(seed=seed).values():
        assert summary["tokens_below_half_squared_share_before"] == 0
        assert summary["tokens_above_leverage_bound"] == 0
        assert summary["target_share_squared"]["before"] >= 0.5
        assert summary["target_share"]["after"] <= summary["target_leverage_sqrt"] + 1e-12


def row(p: np.ndarray, target: int) -> np.ndarray:
    g = np.array(p, dtype=float)[None, :]
    g[0, target] -= 1
    return g


def basis(*columns: np.ndarray) -> np.ndarray:
    return np.linalg.qr(np.column_stack(columns))[0]


def test_a_head_whose_column_space_holds_e_t_keeps_the_target_coordinate():
    V, rng = 60, np.random.default_rng(0)
    p = rng.dirichlet(np.ones(V))
    e = np.eye(V)
    for t in range(5):
        Q = basis(e[t], *rng.standard_normal((4, V)))
        stats = sa.block_statistics(row(p, t), np.array([t]), Q, (5, 10))
        assert stats["target_agrees"][0]
        assert stats["leverage_sqrt"][0] == pytest.approx(1)


def test_the_identity_projection_keeps_every_sign_and_share():
    V, rng = 40, np.random.default_rng(1)
    g = row(rng.dirichlet(np.ones(V)), 3)
    stats = sa.block_statistics(g, np.array([3]), np.eye(V), (5, 10))
    assert stats["target_agrees"][0] and stats["top_10_agreement"][0] == 1 and stats["tail_agreement"][0] == 1
    assert stats["target_share_after"][0] == pytest.approx(stats["target_share_before"][0])
    assert stats["top_10_coupling"][0] == 0


def test_the_share_after_the_projection_is_not_ordered_against_the_share_before():
    """1 on col W = span(e_t), 0 on a col W orthogonal to e_t: neither inequality is a theorem."""
    V, t = 30, 2
    g = row(np.full(V, 1 / V), t)
    e = np.eye(V)
    on_target = sa.block_statistics(g, np.array([t]), basis(e[t]), (5,))
    away = sa.block_statistics(g, np.array([t]), basis(e[t + 1], e[t + 2]), (5,))
    assert on_target["target_share_after"][0] == pytest.approx(1)
    assert on_target["target_share_before"][0] < 0.99
    assert away["target_share_after"][0] == 0 < away["target_share_before"][0]


def test_a_head_can_flip_the_target_sign():
    """(gΠ)_t = <Πe_t, g> can be positive: with p split between s and r, col W = span(0.1 e_t + e_s + e_r)."""
    V, t, s, r = 10, 0, 1, 2
    p = np.full(V, 1e-3)
    p[s] = p[r] = (1 - p.sum() + 2e-3) / 2
    e = np.eye(V)
    stats = sa.block_statistics(row(p, t), np.array([t]), basis(0.1 * e[t] + e[s] + e[r]), (3,))
    assert not stats["target_agrees"][0] and stats["top_3_coupling"][0] > 0


def test_the_model_head_keeps_more_top_signs_than_a_random_head():
    """The projection on a head's own col W is correlated with its gradient's top coordinates; on
    an unrelated random col W they are near chance."""
    summary = synthetic(V=2000, D=32)
    assert summary["own"]["top_k_sign_agreement"]["5"] > summary["other"]["top_k_sign_agreement"]["5"] + 0.1
    assert abs(summary["other"]["tail_sign_agreement"] - sa.CHANCE) < 0.05


def test_bad_input_names_the_argument():
    W = cp.construct_head(20, 3, 0)
    H, targets = cp.construct_batch(4, 3, 20, 1)
    Q = cp.column_basis(W)[0]
    with pytest.raises(InputError, match="top_k"):
        sa.sign_agreement(H, W, targets, {"w": Q}, top_k=(19,))
    with pytest.raises(InputError, match="bases"):
        sa.sign_agreement(H, W, targets, {"w": Q[:10]}, top_k=(5,))


def test_too_few_tokens_is_a_usage_error(capsys, tmp_path):
    assert main(["experiment", "sign-agreement", "--tokens", "3", "--out", str(tmp_path)]) == 2
    assert "--tokens" in capsys.readouterr().err


def _tiny_llama(folder: Path, V: int = 300) -> None:
    """A random llama (D = 16) with a word-level tokenizer over the first V - 1 words of WikiText-2."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from rankwall.checks.companion.data import read_corpus

    words = Counter(read_corpus(sa.TEXT)[:20_000].split())
    vocab = {w: i for i, w in enumerate(["<unk>", *(w for w, _ in words.most_common(V - 1))])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=V,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(folder)


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("tokenizers") is None,
    reason=f"transformers is not installed ({loading.INSTALL_HINT})",
)
def test_cli_runs_a_tiny_model_end_to_end(tmp_path, capsys):
    _tiny_llama(tmp_path / "model")
    out = tmp_path / "out"
    arguments = ["--model", str(tmp_path / "model"), "--tokens", "32", "--out", str(out), "--json"]
    assert main(["experiment", "sign-agreement", *arguments]) == 0
    record = json.loads(capsys.readouterr().out)
    assert (record["V"], record["D"], record["tokens"], record["head_rank"]) == (300, 16, 32, 16)
    assert set(record["heads"]) == {sa.MODEL_HEAD, sa.RANDOM_HEAD}
    for summary in record["heads"].values():
        assert summary["tokens_above_leverage_bound"] == summary["tokens_below_half_squared_share_before"] == 0
    assert (out / "sign_agreement.png").is_file() and json.loads((out / "sign_agreement.json").read_text()) == record


def test_the_recorded_run_obeys_the_bounds():
    record = json.loads(RECORDED.read_text())
    assert (record["V"], record["D"], record["tied_head"]) == (49152, 576, True)
    for summary in record["heads"].values():
        assert summary["tokens_above_leverage_bound"] == summary["tokens_below_half_squared_share_before"] == 0
        assert all(0 <= x <= 1 for x in shares(summary))


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None or importlib.util.find_spec("transformers") is None,
    reason=f"SmolLM2 or transformers is not installed ({loading.INSTALL_HINT})",
)
def test_the_recorded_run_is_reproduced(tmp_path, capsys):
    """The docs quote docs/_static/experiments/sign_agreement.json: the same command gives the same
    shares up to float32 forward-pass noise across machines."""
    assert main(["experiment", "sign-agreement", "--out", str(tmp_path), "--json"]) == 0
    fresh, recorded = json.loads(capsys.readouterr().out), json.loads(RECORDED.read_text())
    for name in (sa.MODEL_HEAD, sa.RANDOM_HEAD):
        assert shares(fresh["heads"][name]) == pytest.approx(shares(recorded["heads"][name]), abs=1e-3)
