"""The command line: JSON contract, exit codes, and clear errors on bad usage."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, main
from rankwall.checks.engine.verdict import REGISTRY

VERDICT_KEYS = {"claim", "status", "lhs", "rhs", "margin", "tolerance", "method", "instance", "certificate"}


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_json_names_every_claim(capsys):
    code, out, _ = run(capsys, "list", "--json")
    listed = json.loads(out)
    assert code == EXIT_OK
    assert [c["id"] for c in listed] == [c.id for c in REGISTRY]
    assert set(listed[0]) == {
        "id", "title", "source", "statement", "domain", "relation", "direction", "array_api", "default_V", "origin",
        "mutants",
    }  # fmt: skip
    assert all(set(m) == {"name", "id", "statement"} for c in listed for m in c["mutants"])


def test_list_table_for_people(capsys):
    code, out, _ = run(capsys, "list")
    assert code == EXIT_OK and "softmax-jacobian.upper-bound" in out


def test_verify_json_contract(capsys):
    code, out, _ = run(capsys, "verify", "softmax-jacobian.*-bound", "--V", "257", "--examples", "3", "--json")
    verdicts = json.loads(out)
    assert code == EXIT_OK
    assert {v["claim"] for v in verdicts} == {"softmax-jacobian.lower-bound", "softmax-jacobian.upper-bound"}
    for v in verdicts:
        assert VERDICT_KEYS <= set(v)
        assert v["status"] == "holds" and v["V"] == 257 and v["backend"] == "numpy"
        assert v["instances_checked"] == sum(v["counts"].values())


def test_verify_table_and_other_backends(capsys):
    code, out, _ = run(capsys, "verify", "softmax-jacobian.kernel", "--backend", "torch", "--dtype", "float32")
    assert code == EXIT_OK and "holds" in out
    code, _, _ = run(
        capsys,
        "verify",
        "softmax-jacobian.trace",
        "--backend",
        "array-api-strict",
        "--device",
        "no_float64",
        "--dtype",
        "float32",
        "--V",
        "16",
    )
    assert code == EXIT_OK


def test_search_finds_the_sharpness_counterexample(capsys):
    code, out, _ = run(capsys, "search", "softmax-jacobian.upper-bound", "--tighten", "0.999", "--json")
    result = json.loads(out)
    assert code == EXIT_VIOLATED and result["found"]
    assert result["counterexample"]["status"] == "violated"
    assert result["counterexample"]["instance"]["case"] == "runner-up"


def test_search_with_no_counterexample_exits_zero(capsys):
    code, out, _ = run(capsys, "search", "softmax-jacobian.upper-bound", "--tighten", "1.0", "--budget", "100")
    assert code == EXIT_OK and "no counterexample" in out


def test_search_a_mutant(capsys):
    code, out, _ = run(capsys, "search", "softmax-jacobian.trace", "--mutant", "equals-entropy", "--json")
    assert code == EXIT_VIOLATED and json.loads(out)["found"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["verify", "--V", "1"], "--V: 1 is out of range"),
        (["verify", "--V", "two"], "--V: expected an integer"),
        (["verify", "--examples", "-3"], "--examples: -3 is out of range"),
        (["verify", "no-such-claim"], "no claim matches"),
        (["verify", "--backend", "jax"], "invalid choice"),
        (["verify", "--device", "cuda"], "numpy runs on the cpu only"),
        (["verify", "--backend", "array-api-strict", "--device", "no_float64"], "has no float64"),
        (["search", "nope"], "unknown claim 'nope'"),
        (["search", "softmax-jacobian.trace", "--tighten", "0.5"], "is an identity"),
        (["search", "softmax-jacobian.upper-bound", "--tighten", "-1"], "--tighten: -1 is out of range"),
        (["search", "softmax-jacobian.upper-bound", "--tighten", "x"], "expected a number"),
        (["search", "softmax-jacobian.upper-bound", "--mutant", "nope"], "has no mutant 'nope'"),
        (["search", "softmax-jacobian.upper-bound", "--budget", "0"], "--budget: 0 is out of range"),
    ],
)
def test_bad_usage_exits_two_with_a_reason(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == EXIT_USAGE
    assert message in err


def test_console_script_is_installed():
    listed = subprocess.run(
        [sys.executable, "-m", "rankwall.checks.cli", "list", "--json"], capture_output=True, text=True, check=True
    )
    assert json.loads(listed.stdout)


def test_batch_rank_experiment_writes_json_and_png(capsys, tmp_path):
    code, out, _ = run(
        capsys, "experiment", "batch-rank", "--batch-sizes", "16", "64", "--out", str(tmp_path), "--json"
    )
    records = json.loads(out)
    assert code == EXIT_OK and len(records) == 6
    assert (tmp_path / "batch_rank.png").stat().st_size > 10_000
    for language in {r["language"] for r in records}:
        ranks = [r["certified_rank"] for r in records if r["language"] == language]
        assert ranks == sorted(ranks), "rank grows with the batch"
    assert all(r["certified_rank"] <= r["V"] - 1 for r in records)


def test_unknown_experiment_is_a_usage_error(capsys):
    code, _, err = run(capsys, "experiment", "nope")
    assert code == EXIT_USAGE and "invalid choice" in err


def test_verify_takes_a_list_of_sizes(capsys):
    """--V N1 N2: one JSON entry per claim and size, in the order given; a table per size."""
    argv = ("verify", "softmax-jacobian.lower-bound*", "--V", "2", "64", "--examples", "2")
    code, out, _ = run(capsys, *argv, "--json")
    entries = [(v["claim"], v["V"], v["status"], v["largest_V"]) for v in json.loads(out)]
    assert code == EXIT_OK  # unchecked at V = 2 does not count
    assert entries == [
        ("softmax-jacobian.lower-bound", 2, "holds", 2),
        ("softmax-jacobian.lower-bound-approached", 2, "unchecked", None),
        ("softmax-jacobian.lower-bound", 64, "holds", 64),
        ("softmax-jacobian.lower-bound-approached", 64, "holds", 64),
    ]
    code, out, _ = run(capsys, *argv)
    assert code == EXIT_OK and "V=2 " in out and "V=64 " in out and out.index("V=2 ") < out.index("V=64 ")


def test_verify_exit_code_is_the_worst_over_the_sizes(capsys, monkeypatch):
    """A violation at one size of several makes the exit code 1, whatever the other sizes say."""
    from rankwall.checks.engine.verdict import Claim, Status

    checked = Claim.check

    def violated_at_128(self, instance, backend, factor=1, **options):
        verdict = checked(self, instance, backend, **options)
        return replace(verdict, status=Status.VIOLATED) if instance.vocabulary == 128 else verdict

    monkeypatch.setattr(Claim, "check", violated_at_128)
    code, out, _ = run(capsys, "verify", "softmax-jacobian.trace", "--V", "64", "128", "--examples", "0", "--json")
    assert code == EXIT_VIOLATED
    assert [(v["V"], v["status"]) for v in json.loads(out)] == [(64, "holds"), (128, "violated")]
