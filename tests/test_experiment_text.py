"""``--text FILE`` for the SmolLM2 experiments (issue 19): the file is read before the model loads (a bad
one exits 2 without loading anything), and a good one is the text the experiment measures."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from rankwall.checks.cli import EXIT_USAGE, main
from rankwall.checks.experiments import attention_heads, efficiency_anatomy, sign_agreement
from rankwall.checks.models import loading
from rankwall.theory.validation import InputError

needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason=f"transformers is not installed ({loading.INSTALL_HINT})"
)
VOCABULARY = 128  # above the top-100 coordinates that sign-agreement reads


def never_load(*args, **kwargs):
    raise AssertionError("the model was loaded before --text was checked")


@pytest.fixture
def no_model(monkeypatch):
    """Loading a model fails the test: every --text error must come first."""
    monkeypatch.setattr(loading, "load_causal_lm", never_load)
    monkeypatch.setattr(attention_heads, "load_causal_lm", never_load)


BAD_TEXTS = [
    (lambda p: p / "absent.txt", "does not exist"),
    (lambda p: p, "is not a file"),
    (lambda p: (p / "latin1.txt").write_bytes(b"caf\xe9 " * 100) and p / "latin1.txt", "is not UTF-8 text"),
]


@pytest.mark.usefixtures("no_model")
@pytest.mark.parametrize("name", ["sign-agreement", "attention-heads", "efficiency-anatomy", "gradient-tail"])
@pytest.mark.parametrize(("make", "message"), BAD_TEXTS)
def test_a_bad_text_exits_two_before_the_model_loads(tmp_path, capsys, name, make, message):
    out = tmp_path / "out"
    out.mkdir()
    assert main(["experiment", name, "--text", str(make(tmp_path)), "--out", str(out)]) == EXIT_USAGE
    error = capsys.readouterr().err
    assert "--text:" in error and message in error


def test_efficiency_anatomy_refuses_a_text_it_would_not_read(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("some words " * 100)
    argv = ["experiment", "efficiency-anatomy", "--no-model", "--text", str(tmp_path / "mine.txt")]
    assert main([*argv, "--out", str(tmp_path)]) == EXIT_USAGE
    assert "--text: applies to the SmolLM2 row, which --no-model skips" in capsys.readouterr().err


class _Characters:
    """A stand-in tokenizer: one id per character, modulo the vocabulary."""

    def __call__(self, text: str) -> dict[str, list[int]]:
        return {"input_ids": [ord(c) % VOCABULARY for c in text]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A random llama (D = 16, V = 128) with a character tokenizer, as a LoadedModel."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=VOCABULARY,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        attn_implementation="eager",
    )
    source = loading.ModelSource(tmp_path_factory.mktemp("tiny"), None, "tiny llama")
    return loading.LoadedModel(LlamaForCausalLM(config).eval(), _Characters(), source)


def texts(tmp_path):
    """Two texts of different characters, so that the measured losses differ."""
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("abcdefgh " * 200)
    second.write_text("the quick brown fox jumps over the lazy dog " * 50)
    return first, second


@pytest.mark.slow  # seconds of model runs; test_efficiency_anatomy_measures_the_given_text is the fast one
@needs_transformers
def test_sign_agreement_measures_the_given_text(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "load_causal_lm", lambda model: tiny)
    records = [sign_agreement.run("tiny", 32, text_file=path) for path in texts(tmp_path)]
    assert [r["text"] for r in records] == [str(p) for p in texts(tmp_path)]
    assert records[0]["loss_float64"] != records[1]["loss_float64"]


@pytest.mark.slow  # seconds of model runs; test_efficiency_anatomy_measures_the_given_text is the fast one
@needs_transformers
def test_attention_heads_measures_the_given_text(tiny, tmp_path):
    first, second = texts(tmp_path)
    records = [
        attention_heads.run(tiny, windows=2, context=16, heads=1, text=path.read_text(), text_label=str(path))
        for path in (first, second)
    ]
    assert [r["text"] for r in records] == [str(first), str(second)]
    assert records[0]["loss"] != records[1]["loss"]


@needs_transformers
def test_efficiency_anatomy_measures_the_given_text(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(loading, "load_causal_lm", lambda model: tiny)
    rows = [efficiency_anatomy.smollm2(32, path.read_text(), str(path)) for path in texts(tmp_path)]
    assert rows[0]["measured_ratio"] != rows[1]["measured_ratio"]
    with pytest.raises(InputError, match=r"short.txt holds .* fewer than --tokens 32"):
        efficiency_anatomy.smollm2(32, "too short", "short.txt")


@pytest.mark.slow  # seconds of model runs; test_efficiency_anatomy_measures_the_given_text is the fast one
@needs_transformers
def test_the_cli_passes_the_text_through(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(attention_heads, "load_causal_lm", lambda model: tiny)
    first, _ = texts(tmp_path)
    argv = ["experiment", "attention-heads", "--windows", "2", "--context", "16", "--heads", "1"]
    assert main([*argv, "--text", str(first), "--out", str(tmp_path), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["text"] == str(first) and np.isfinite(record["loss"])
