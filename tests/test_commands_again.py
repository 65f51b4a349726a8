"""The commands a second time (issue 28, items 8 to 12), item by item: piped output whole, several
claims for `search`, the failing instance under the verify table, each default once in `--help`,
`spot`'s arguments and lines, `argmax`'s token strings, and bad input for each new argument. Every
test here failed before the change (the spot tests that need SmolLM2 are in tests/test_spot.py)."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankwall.checks.cli import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, build_parser, main
from rankwall.checks.cli.commands import argmax as argmax_command
from rankwall.checks.cli.commands import search as search_command
from rankwall.checks.cli.commands import spot as spot_command
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY, Claim, Status
from rankwall.checks.experiments import mos_rank
from rankwall.checks.models import argmax as argmax_library
from rankwall.checks.models import loading
from rankwall.checks.run.search import SearchResult

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def piped(*argv: str, columns: int = 40) -> subprocess.CompletedProcess:
    """``rankwall ARGV`` with stdout and stderr to pipes and a terminal width of ``columns``."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    env["COLUMNS"] = str(columns)
    return subprocess.run(
        [sys.executable, "-m", "rankwall.checks.cli", *argv], capture_output=True, text=True, env=env, timeout=600
    )


# --------------------------------------------------------------------------- item 8: piped output


def test_item_8_piped_verify_keeps_every_line_whole(capsys):
    """At COLUMNS=40, piped: the summary line ends with its time, the legend is one line, and each
    claim's method stands whole on its claim's row (before: wrapped at 40 columns)."""
    argv = ("verify", "softmax-jacobian.rank", "softmax-jacobian.trace", "--examples", "1")
    done = piped(*argv)
    assert done.returncode == EXIT_OK, done.stderr
    lines = done.stdout.splitlines()
    assert re.fullmatch(
        r"2 claims: 2 hold, 0 violated, 0 inconclusive, 0 unchecked; \d+ instances in \d+\.\d s", lines[-1]
    )
    assert lines[-2].startswith("margin = rhs − lhs") and lines[-2].endswith("whatever --backend asks.")
    assert "…" not in done.stdout
    _, out, _ = run(capsys, *argv, "--json")
    for verdict in json.loads(out):
        row = next(line for line in lines if f" {verdict['claim']} " in line)
        assert verdict["method"] in row, (verdict["method"], row)


def test_item_8_a_piped_table_that_does_not_fit_is_printed_whole(tmp_path):
    """mos-rank's ten columns at COLUMNS=40, piped: every cell whole, as the JSON has it (before:
    `│ mos  ││  │ 1… │`)."""
    done = piped(
        "experiment", "mos-rank", "--K", "1", "2", "--D", "2", "--N", "16", "--V", "16", "--out", str(tmp_path)
    )
    assert done.returncode == EXIT_OK, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in row.strip("│").split("│")] for row in rows]
    records = json.loads((tmp_path / "mos_rank.json").read_text())["records"]
    assert cells == [
        [r["head"], str(r["D"]), str(r["K"]), str(r["rank_lower"]), str(r["rank_upper"]), r["certified_by"],
         mos_rank.upper_end(r), *map(str, r["numerical_rank"].values())]
        for r in records
    ]  # fmt: skip


# --------------------------------------------------------------------------- item 9: search, verify, --help


def test_item_9_search_takes_several_claims_and_patterns(capsys):
    """One search per claim named, a summary line, the exit code of the worst; --json of a pattern is a
    list (before: a pattern was an unknown claim, and the error listed every id on one line)."""
    argv = ("softmax-jacobian.upper-bound", "softmax-jacobian.lower-bound", "--tighten", "0.999", "--budget", "10")
    code, out, _ = run(capsys, "search", *argv)
    assert code == EXIT_VIOLATED
    assert out.index("counterexample to softmax-jacobian.upper-bound") < out.index("softmax-jacobian.lower-bound")
    last = out.splitlines()[-1]
    assert re.fullmatch(
        r"2 searches: 1 found a counterexample, 0 undecided, 1 found none; \d+ examples in [\d.]+ s", last
    )
    code, out, _ = run(capsys, "search", "softmax-jacobian.upper-b*", "--tighten", "0.999", "--budget", "10", "--json")
    records = json.loads(out)
    assert code == EXIT_VIOLATED and [(r["claim"], r["found"]) for r in records] == [
        ("softmax-jacobian.upper-bound", True)
    ]


def test_item_9_the_exit_code_is_the_worst_search(capsys, monkeypatch):
    """Undecided instances (3) outrank none found (0), a counterexample (1) outranks both, in any order."""
    claim = REGISTRY["softmax-jacobian.trace"]
    violated = replace(claim.check(claim.witnesses(16)[0], resolve("numpy")), status=Status.VIOLATED)
    outcome = {
        "softmax-jacobian.trace": "none",
        "softmax-jacobian.kernel": "undecided",
        "softmax-jacobian.rank": "found",
    }

    def planted(claim: Claim, backend, **options) -> SearchResult:
        kind = outcome[claim.id]
        return SearchResult(
            claim=claim.id, tighten=options["tighten"], budget=options["budget"], seed=0, examples=1, rejected=0,
            shrink_steps=0, seconds=0.0, counterexample=violated if kind == "found" else None,
            undecided=int(kind == "undecided"),
        )  # fmt: skip

    monkeypatch.setattr(search_command, "search", planted)
    code, out, _ = run(capsys, "search", "softmax-jacobian.trace", "softmax-jacobian.kernel")
    assert code == EXIT_INCONCLUSIVE and "2 searches: 0 found a counterexample, 1 undecided, 1 found none" in out
    code, _, _ = run(capsys, "search", "softmax-jacobian.rank", "softmax-jacobian.kernel", "softmax-jacobian.trace")
    assert code == EXIT_VIOLATED
    code, _, _ = run(capsys, "search", "softmax-jacobian.trace")
    assert code == EXIT_OK


def test_item_9_the_verify_table_names_the_failing_instance(capsys, monkeypatch):
    """A violated claim's worst instance, sides and certificate follow the tables, as --json gives them."""
    checked = Claim.check

    def violated_at_128(self, instance, backend, factor=1, **options):
        verdict = checked(self, instance, backend, **options)
        return replace(verdict, status=Status.VIOLATED) if instance.vocabulary == 128 else verdict

    monkeypatch.setattr(Claim, "check", violated_at_128)
    argv = ("verify", "softmax-jacobian.trace", "--V", "64", "128", "--examples", "0")
    code, out, _ = run(capsys, *argv, "--json")
    worst = next(v for v in json.loads(out) if v["status"] == "violated")
    code, out, _ = run(capsys, *argv)
    lines = out.splitlines()
    at = lines.index("softmax-jacobian.trace violated at V = 128 on its worst instance:")
    assert code == EXIT_VIOLATED
    assert lines[at + 1] == f"  instance  {json.dumps(worst['instance'])}"
    assert lines[at + 2].startswith(f"  lhs {worst['lhs']!r}  rhs {worst['rhs']!r}  margin ")
    assert lines[at + 3] == f"  certified by {worst['certified_by']}: {worst['method']}"
    assert "at V = 64" not in out


def _subparsers(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {n}", s) for n, s in _subparsers(sub))


def test_item_9_help_prints_each_default_once():
    """No option's help says its default twice (before: `--V ... (default: each claim's default_V)
    (default: None)`), nor a default of nothing."""
    for name, sub in _subparsers(build_parser()):
        formatter = sub._get_formatter()
        for action in sub._actions:
            if action.help is argparse.SUPPRESS:
                continue
            text = " ".join(formatter._format_action(action).split())
            assert len(re.findall(r"\(default", text)) <= 1, f"rankwall {name}: {text}"
            for nothing in ("(default: None)", "(default: False)", "(default: [])"):
                assert nothing not in text, f"rankwall {name}: {text}"
    verify = dict(_subparsers(build_parser()))["verify"].format_help()
    assert "(default: 16)" in verify and "(default: 0)" in verify  # real defaults stay


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["zz*"], "CLAIM: no claim matches 'zz*'"),
        (["softmax-jacobian.uper-bound"], "did you mean 'softmax-jacobian.upper-bound'?"),
        (["softmax-jacobian.*-bound", "--mutant", "constant-1.9"], "--mutant: applies to one claim, and CLAIM names 2"),
        (["softmax-jacobian.t*", "softmax-jacobian.upper-bound", "--tighten", "0.5"],
         "--tighten: softmax-jacobian.trace is an identity"),
        (["softmax-jacobian.upper-bound[nope]"], "has no mutant 'nope'"),
    ],
)  # fmt: skip
def test_item_12_bad_search_claims_exit_two_in_one_line_and_leave_nothing(capsys, tmp_path, argv, message):
    saved = tmp_path / "saved"
    code, out, err = run(capsys, "search", *argv, "--save", str(saved))
    assert code == EXIT_USAGE and out == ""
    assert err.count("\n") == 1 and err.startswith("rankwall: error: ") and message in err, err
    assert not saved.exists()


# --------------------------------------------------------------------------- item 10: spot without a model


def test_item_10_the_readme_says_spot_needs_the_models_extra():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A real model: `rankwall spot`")[1].split("\n## ")[0]
    assert loading.EXTRA_HINT in section


def test_item_10_an_empty_text_is_refused_before_anything_loads(capsys, tmp_path, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("loaded before the text was checked")

    monkeypatch.setattr(loading, "load_tokenizer", never)
    monkeypatch.setattr(loading, "load_causal_lm", never)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    out = tmp_path / "out"
    code, _, err = run(capsys, "spot", "--text", str(empty), "--out", str(out))
    assert code == EXIT_USAGE and err == f"rankwall: error: --text: {empty} is empty (0 characters)\n"
    assert not out.exists()


def test_item_10_the_log_p_rank_line_says_when_it_cannot_test_the_bound():
    """Over N <= D + 1 contexts every head's log P has rank at most N <= D + 1: the line says so."""
    record = json.loads((ROOT / "docs" / "_static" / "spot" / "spot.json").read_text())
    ranks = record["log_probability_rank"]
    assert "cannot test" not in spot_command.log_probability_rank_line(ranks)  # 1,024 contexts > 577
    capped = {**ranks, "contexts": 256, "lower": 256, "upper": 256}
    line = spot_command.log_probability_rank_line(capped)
    assert line.startswith("rank of log P: 256..256 (D + 1 = 577)")
    assert "N = 256 contexts <= D + 1 = 577" in line and "cannot test the bound" in line and "--tokens 578" in line


# --------------------------------------------------------------------------- item 11: argmax's token strings

#: A head whose never-argmax tokens are known: the origin (the midpoint of ±e2) and the twins e1.
HEAD = np.array([[0, 0], [1, 0], [-1, 0], [0, 1], [0, -1], [1, 0]], dtype=np.float32)
#: Byte-level pieces: a special token, " the", "\n", two letters, and the bytes e2 80 (a third of "…").
PIECES = ["<|endoftext|>", "Ġthe", "Ċ", "a", "b", "âĢ"]


def tokenizer_json(pieces: list[str], decoder: dict) -> dict:
    """A complete tokenizer.json (BPE, no merges) that the tokenizers library loads."""
    return {
        "version": "1.0", "truncation": None, "padding": None, "normalizer": None, "post_processor": None,
        "added_tokens": [{"id": 0, "content": pieces[0], "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "pre_tokenizer": None, "decoder": decoder,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {piece: i for i, piece in enumerate(pieces)}, "merges": []},
    }  # fmt: skip


BYTE_LEVEL = {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}


@pytest.fixture
def model_folder(tmp_path):
    """A Hugging Face folder: config.json, the head in model.safetensors, a byte-level tokenizer.json."""
    from safetensors.numpy import save_file

    folder = tmp_path / "tiny"
    folder.mkdir()
    save_file({"lm_head.weight": HEAD}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"tie_word_embeddings": False}))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(PIECES, BYTE_LEVEL)))
    return folder


def test_item_11_argmax_prints_each_never_tokens_string(capsys, model_folder):
    """Table and JSON give the string of each never token beside its id (before: ids only)."""
    code, out, _ = run(capsys, "argmax", "--head", str(model_folder), "--json")
    record = json.loads(out)
    assert code == EXIT_OK and record["unargmaxable"] == [0, 1, 5]
    assert record["never_strings"] == {"0": "<|endoftext|>", "1": " the", "5": "\\xe2\\x80"}
    assert record["tokenizer"] == "tokenizer.json (byte-level)"
    code, out, _ = run(capsys, "argmax", "--head", str(model_folder))
    assert code == EXIT_OK and '0 "<|endoftext|>", 1 " the", 5 "\\xe2\\x80"' in out


def test_item_11_the_strings_are_the_tokenizers_own(model_folder):
    """The tokenizers library decodes the same file to the same text wherever the bytes are UTF-8."""
    tokenizers = pytest.importorskip("tokenizers")
    reference = tokenizers.Tokenizer.from_file(str(model_folder / "tokenizer.json"))
    vocabulary = loading.load_vocabulary(model_folder)
    for token in range(len(PIECES)):
        data = vocabulary.bytes_of(token)
        decoded = reference.decode([token], skip_special_tokens=False)
        try:
            assert data.decode("utf-8") == decoded, token
        except UnicodeDecodeError:
            assert "\ufffd" in decoded, token  # the library replaces what is not UTF-8


def test_item_11_a_sentencepiece_gguf_head_names_its_tokens(capsys, tmp_path):
    """A llama-style GGUF vocabulary: ▁ is a space, <0x0A> a byte, a control token literal."""
    gguf = pytest.importorskip("gguf")
    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("llama")
    writer.add_token_list(["<unk>", "<s>", "▁the", "<0x0A>", "é", "▁the"])
    writer.add_token_types([2, 3, 1, 6, 1, 1])
    writer.add_tensor("token_embd.weight", HEAD)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    vocabulary = loading.load_vocabulary(path)
    assert vocabulary.encoding == "sentencepiece"
    assert [vocabulary.bytes_of(i) for i in range(6)] == [b"<unk>", b"<s>", b" the", b"\n", "é".encode(), b" the"]
    code, out, _ = run(capsys, "argmax", "--head", str(path), "--json")
    assert code == EXIT_OK and json.loads(out)["never_strings"] == {"0": "<unk>", "1": "<s>", "5": " the"}


def test_item_11_a_head_without_a_tokenizer_has_no_strings(capsys, tmp_path):
    head = tmp_path / "head.npy"
    np.save(head, HEAD.astype(np.float64))
    code, out, _ = run(capsys, "argmax", "--head", str(head), "--json")
    record = json.loads(out)
    assert code == EXIT_OK and record["never_strings"] is None and record["tokenizer"] is None


ESCAPED = [
    (b" the", " the"), (b"\n", "\\n"), (b"\t\r", "\\t\\r"), (b"\\", "\\\\"), (b'"', '\\"'), (b"\x01", "\\x01"),
    ("é".encode(), "é"), (b"\xe2\x80", "\\xe2\\x80"), ("\u00a0".encode(), "\\u00a0"), ("\u200b".encode(), "\\u200b"),
    ("\U000e0001".encode(), "\\U000e0001"), ("…".encode(), "…"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "shown"), ESCAPED)
def test_item_11_strings_are_escaped(data, shown):
    assert argmax_library.escaped_text(data) == shown


def unescaped(text: str) -> bytes:
    """The bytes an escaped string stands for, read as the docs describe the escapes (the reference)."""
    named = {"\\": b"\\", '"': b'"', "n": b"\n", "t": b"\t", "r": b"\r"}
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] != "\\":
            out += text[i].encode("utf-8")
            i += 1
        elif text[i + 1] in named:
            out += named[text[i + 1]]
            i += 2
        else:
            width = {"x": 2, "u": 4, "U": 8}[text[i + 1]]
            code = int(text[i + 2 : i + 2 + width], 16)
            out += bytes([code]) if text[i + 1] == "x" else chr(code).encode("utf-8")
            i += 2 + width
    return bytes(out)


@settings(max_examples=50)
@given(st.binary(max_size=24) | st.text(max_size=12).map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_item_11_escaped_strings_print_and_give_back_their_bytes(data):
    shown = argmax_library.escaped_text(data)
    assert shown.isprintable()
    assert unescaped(shown) == data


# --------------------------------------------------------------------------- item 12: bad tokenizer files


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("tokenizer.json", "{not json", "tokenizer.json is not valid JSON"),
        ("tokenizer.json", json.dumps({"model": {"type": "BPE"}}), "has no model.vocab"),
        ("tokenizer.json", json.dumps([1, 2]), "has no model.vocab"),
        ("vocab.json", json.dumps(["a", "b"]), "vocab.json holds no JSON object"),
    ],
)
def test_item_12_a_bad_tokenizer_file_exits_two_before_the_tokens_are_decided(
    capsys, tmp_path, model_folder, monkeypatch, name, content, message
):
    (model_folder / "tokenizer.json").unlink()
    (model_folder / name).write_text(content)
    monkeypatch.setattr(argmax_command, "summarize", lambda *a, **k: pytest.fail("decided before the check"))
    certificates = tmp_path / "certificates"
    code, out, err = run(capsys, "argmax", "--head", str(model_folder), "--certificates", str(certificates))
    assert code == EXIT_USAGE and out == "" and err.count("\n") == 1
    assert err.startswith("rankwall: error: --head: ") and message in err, err
    assert not certificates.exists()


def test_item_12_odd_but_readable_tokenizer_entries_are_left_out_not_a_crash(capsys, model_folder):
    """Added tokens that are not a list, ids that are not integers and ids beyond V give no string."""
    data = tokenizer_json(PIECES, BYTE_LEVEL)
    data["added_tokens"] = {"0": "<|endoftext|>"}
    data["model"]["vocab"] = {"Ġthe": 1, "x": "2", "âĢ": 10**12}
    (model_folder / "tokenizer.json").write_text(json.dumps(data))
    code, out, _ = run(capsys, "argmax", "--head", str(model_folder), "--json")
    assert code == EXIT_OK and json.loads(out)["never_strings"] == {"1": " the"}
