"""Spot checks on the real SmolLM2-135M (rankwall.checks.models.spot); skipped where it is not installed."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from rankwall.checks.cli import main
from rankwall.checks.cli.commands import spot as spot_command
from rankwall.checks.companion.data import read_corpus
from rankwall.checks.engine import tolerance
from rankwall.checks.models import argmax as argmax_library
from rankwall.checks.models import loading, spot
from rankwall.checks.run.outputs import PlainProgress
from rankwall.theory.validation import InputError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec(loading.SMOLLM2_PACKAGE) is None or importlib.util.find_spec("transformers") is None,
    reason=f"SmolLM2 or transformers is not installed ({loading.INSTALL_HINT})",
)

TOKENS = 96


@pytest.fixture(scope="module")
def smollm2():
    return loading.load_causal_lm()


@pytest.fixture(scope="module")
def tiny_folder(smollm2, tmp_path_factory):
    """A tiny random llama (D = 32, SmolLM2's vocabulary and tokenizer) saved as a Hugging Face folder."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=49152,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=False,
    )
    folder = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    smollm2.tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def record(smollm2):
    return spot.spot(smollm2, read_corpus("wikitext-2.valid.txt"), TOKENS, context=48, argmax=False)


def test_the_model_is_the_one_the_data_readme_describes(smollm2):
    assert smollm2.head.shape == (49152, 576) and smollm2.tied


def test_eq1_shares_are_a_pythagorean_pair(record):
    eq1 = record["eq1"]
    assert 0 < eq1["destroyed"] < 1 and 0 < eq1["cosine"] < 1
    slack = tolerance.gamma(record["V"] + 4, 2.0**-53) * 4
    assert abs(eq1["destroyed"] ** 2 + eq1["cosine"] ** 2 - 1) <= slack
    assert abs(eq1["destroyed_squared"] - eq1["destroyed"] ** 2) <= slack


def test_gradient_rank_never_exceeds_its_rows(record):
    for row in record["gradient_rank"]:
        assert row["components_70"] <= row["components_99.9"] <= row["certified_rank"] <= row["tokens"]


def test_the_logit_gradient_is_the_steepest_first_order_direction(record):
    """For a small enough step, -G (unit Frobenius norm) lowers the loss at least as much as any other
    unit direction, the induced -G W W^T included."""
    eff = record["update_efficiency"]
    assert eff["logit gradient"][0] < eff["hidden-state update"][0] < 0


def test_attention_rows_obey_the_jacobian_theory(record):
    attention = record["attention"]
    assert attention["rows"] == 30 * 9 * TOKENS
    assert attention["jacobian_bound_violations"] == 0
    assert attention["gain_above_norm_violations"] == 0
    assert attention["rows_summing_to_zero_within_float32_rounding"] == attention["rows"]


def test_float64_loss_matches_the_model_to_float32_rounding(smollm2, record):
    """The model's float32 logits carry at most gamma_{D+2}(float32) ||w|| ||h|| each; the mean
    cross-entropy moves by at most twice the largest logit error."""
    W = smollm2.head
    ids = spot.read_tokens(smollm2, read_corpus("wikitext-2.valid.txt"), "wikitext-2.valid.txt", TOKENS)
    import torch

    with torch.no_grad():
        H = smollm2.model.model(input_ids=torch.as_tensor(ids[:-1])[None, :48]).last_hidden_state[0].double().numpy()
    bound = (
        2
        * tolerance.gamma(W.shape[1] + 2, 2.0**-24)
        * np.linalg.norm(W, axis=1).max()
        * np.linalg.norm(H, axis=1).max()
    )
    assert abs(record["loss_float64"] - record["loss_float32_model"]) <= bound


def test_fewer_contexts_than_d_give_their_own_rank_and_no_hidden_size(record):
    """At 96 tokens both ends of rank(log P) meet at the 96 contexts, and the centred rank, capped by
    them too, recovers no hidden size."""
    ranks = record["log_probability_rank"]
    assert (ranks["lower"], ranks["upper"], ranks["centred"]["lower"], ranks["centred"]["upper"]) == (96,) * 4
    assert ranks["hidden_size_recovered"] is None
    assert ranks["factorization_residual"] <= ranks["residual_bound"]


@pytest.mark.slow  # 640 SmolLM2 contexts; the tiny llama of test_a_local_hugging_face_folder_runs_end_to_end and
# tests/test_logprob_rank.py check the same contract (D + 1 from both ends, D recovered) fast
def test_the_rank_of_smollm2s_log_probabilities_is_d_plus_one(smollm2):
    """On 640 contexts: the model's own float32 log P is within its rounding bound of the factorization
    through D + 1 = 577 columns, its singular values certify 577 from below, and the centred outputs
    recover D = 576."""
    import torch

    from rankwall.checks.models import logprob_rank

    ids = spot.read_tokens(smollm2, read_corpus("wikitext-2.valid.txt"), "wikitext-2.valid.txt", 640)
    with torch.no_grad():
        state = smollm2.model.model(input_ids=torch.as_tensor(ids[:-1])[None, :]).last_hidden_state
        logits = smollm2.model.get_output_embeddings()(state)[0].numpy()
    served = torch.log_softmax(torch.from_numpy(logits), dim=-1).numpy()
    result = logprob_rank.model_rank(state[0].numpy(), smollm2.head, None, served, logits)
    assert (result.log_probability.lower, result.log_probability.upper) == (577, 577)
    assert (result.centred.lower, result.centred.upper) == (576, 576) and result.hidden_size_recovered == 576
    assert result.residual <= result.residual_bound


def test_text_shorter_than_the_tokens_is_refused(smollm2):
    with pytest.raises(InputError, match=r"short.txt holds .* fewer than --tokens 1000"):
        spot.read_tokens(smollm2, "Too short to hold a thousand tokens.", "short.txt", 1000)


def test_cli_spot_on_a_missing_model_folder(tmp_path, capsys):
    assert main(["spot", str(tmp_path / "no-model"), "--tokens", "16"]) == 2
    assert "model:" in capsys.readouterr().err


def test_cli_spot_writes_json_and_png_and_counts_its_steps(tiny_folder, tmp_path, capsys, monkeypatch):
    """The command's contract on a tiny model folder (SmolLM2 itself: the recorded run, under --runslow),
    and its progress lines (issue 28, item 10): titled spot, each naming the step under way with the
    count of the steps done, up to all of them (before: "loading the model: 4/7" long after loading)."""
    monkeypatch.setattr(spot_command, "progress_bar", lambda console: PlainProgress(console, every=0.0))
    argv = [str(tiny_folder), "--tokens", "32", "--context", "32", "--no-argmax", "--json", "--out", str(tmp_path)]
    assert main(["spot", *argv]) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out)
    assert printed == json.loads((tmp_path / "spot.json").read_text())
    assert printed["D"] == 32 and (tmp_path / "spot.png").stat().st_size > 10_000
    steps = ["loading the model", *spot.steps(argmax=False), "writing spot.json and spot.png"]
    lines = [re.fullmatch(r"spot: (\d+)/(\d+), (.+), \d+ s", line) for line in captured.err.splitlines()]
    assert all(lines), captured.err
    assert [(int(m[1]), int(m[2]), m[3]) for m in lines] == [(k, len(steps), s) for k, s in enumerate(steps, 1)]


def test_a_short_text_is_refused_once_the_tokenizer_is_read_before_the_model(
    tiny_folder, tmp_path, capsys, monkeypatch
):
    """--tokens against the text needs only the tokenizer (issue 28, item 10: before, the model loaded first)."""

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded before the text was checked")

    monkeypatch.setattr(loading, "load_causal_lm", never)
    short = tmp_path / "short.txt"
    short.write_text("Too short to hold a thousand tokens.")
    out = tmp_path / "out"
    code = main(["spot", str(tiny_folder), "--text", str(short), "--tokens", "1000", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and re.fullmatch(rf"rankwall: error: --text: {re.escape(str(short))} holds \d+ tokens, "
                                      r"fewer than --tokens 1000 \+ 1\n", err), err  # fmt: skip
    assert not out.exists()


def test_the_vocabulary_is_read_as_the_tokenizer_decodes_it(tiny_folder):
    """`argmax`'s token strings (issue 28, item 11) come from the files alone: SmolLM2's GGUF
    tokenizer.ggml.tokens and the tokenizer.json transformers writes for it give the same bytes for all
    49,152 tokens, and the tokenizers library decodes each to that text (or to U+FFFD where the bytes
    are a piece of a character)."""
    tokenizers = pytest.importorskip("tokenizers")
    from_gguf = loading.load_vocabulary(None)
    from_json = loading.load_vocabulary(tiny_folder)
    assert (from_gguf.encoding, from_json.encoding) == ("byte-level", "byte-level")
    V = len(from_gguf.pieces)
    assert V == 49152 and all(from_gguf.bytes_of(i) == from_json.bytes_of(i) for i in range(V))
    reference = tokenizers.Tokenizer.from_file(str(tiny_folder / "tokenizer.json"))
    for token, text in enumerate(reference.decode_batch([[i] for i in range(V)], skip_special_tokens=False)):
        data = from_gguf.bytes_of(token)
        try:
            assert data.decode("utf-8") == text, token
        except UnicodeDecodeError:
            assert "\ufffd" in text, token
    never = json.loads((Path(__file__).resolve().parents[1] / "docs/_static/spot/spot.json").read_text())[
        "unargmaxable"
    ]
    strings = argmax_library.token_strings(from_gguf, never)
    assert strings[5] == "<file_sep>" and strings[45175] == " transistorsum"


@pytest.mark.slow
def test_the_recorded_run_in_the_docs_is_reproduced(tmp_path, capsys):
    """docs/models.md quotes docs/_static/spot/spot.json; the same command reproduces its figures up to
    float32 forward-pass differences across machines (1e-3 on shares and cosines)."""

    assert main(["spot", "--tokens", "1024", "--json", "--out", str(tmp_path)]) == 0
    fresh = json.loads(capsys.readouterr().out)
    recorded = json.loads((Path(__file__).resolve().parents[1] / "docs/_static/spot/spot.json").read_text())
    for key in ("destroyed", "cosine", "destroyed_per_token", "cosine_per_token"):
        assert abs(fresh["eq1"][key] - recorded["eq1"][key]) <= 1e-3
    assert fresh["gradient_rank"] == recorded["gradient_rank"]
    assert fresh["unargmaxable"] == recorded["unargmaxable"]
    for head in (fresh["log_probability_rank"], fresh["log_probability_rank"]["random_head"]):
        assert (head["lower"], head["upper"], head["hidden_size_recovered"]) == (577, 577, 576)
    with_bias = fresh["log_probability_rank"]["head_with_bias"]
    assert (with_bias["lower"], with_bias["upper"], with_bias["hidden_size_recovered"]) == (578, 578, 577)
    keys = ("lower", "upper", "hidden_size_recovered")
    assert [fresh["log_probability_rank"][k] for k in keys] == [recorded["log_probability_rank"][k] for k in keys]


def test_the_gradient_tail_experiment_runs_on_a_tiny_model(tiny_folder, tmp_path, capsys):
    """rankwall experiment gradient-tail on the tiny llama (D = 32): 80 tokens > 2D = 64, so its last
    block has a tail beyond 2D, certified; JSON and PNG written."""
    from rankwall.checks.experiments import gradient_tail

    out = tmp_path / "out"
    argv = ["experiment", "gradient-tail", "--model", str(tiny_folder), "--tokens", "80", "--out", str(out), "--json"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert record == json.loads((out / "gradient_tail.json").read_text()) and (out / "gradient_tail.png").is_file()
    rows = record["heads"][gradient_tail.MODEL_HEAD]
    assert record["D"] == 32 and [r["tokens"] for r in rows] == [40, 64, 80]
    assert rows[0]["tail_beyond_2D"] == rows[1]["tail_beyond_2D"] == 0.0 < rows[2]["tail_beyond_2D_lower"]


def test_a_local_hugging_face_folder_runs_end_to_end(tiny_folder):
    """A tiny random llama saved with save_pretrained (safetensors, SmolLM2's tokenizer) loads from
    its folder, its head loads alone, and the spot check runs on it."""
    loaded = loading.load_causal_lm(tiny_folder)
    W, bias, _ = loading.load_head(tiny_folder)
    assert np.array_equal(W, loaded.head) and bias is None and not loaded.tied
    record = spot.spot(loaded, read_corpus("wikitext-2.valid.txt"), 48, context=48, argmax=False)
    assert record["D"] == 32 and record["attention"]["rows"] == 2 * 4 * 48
    assert record["attention"]["jacobian_bound_violations"] == 0
    ranks = record["log_probability_rank"]  # any model spot loads: D + 1 = 33 on 48 contexts
    assert (ranks["lower"], ranks["upper"], ranks["hidden_size_recovered"]) == (33, 33, 32)
