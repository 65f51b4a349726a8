"""What a newcomer met on the command line (issue 19), item by item: each test failed before the fix."""

from __future__ import annotations

import argparse
import io
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, build_parser, main
from rankwall.checks.cli.commands import verify as verify_command
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY
from rankwall.checks.run import outputs, runner
from rankwall.theory.validation import InputError

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_item_1_output_files_follow_the_umask(tmp_path):
    previous = os.umask(0o022)
    try:
        json_path, png_path = outputs.write_outputs(
            {"a": 1}, tmp_path, "x", lambda data, path: path.write_bytes(b"png")
        )
    finally:
        os.umask(previous)
    assert stat.S_IMODE(json_path.stat().st_mode) == 0o644
    assert stat.S_IMODE(png_path.stat().st_mode) == 0o644


def test_item_2_a_flag_that_does_not_apply_is_refused(capsys):
    code, _, err = run(capsys, "compress", "--head", "random", "--rank", "4", "--V", "64", "--D", "8")
    assert code == EXIT_USAGE and "--rank: applies to --head lowrank only" in err


def _subcommands(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield name, sub
                yield from ((f"{name} {n}", s) for n, s in _subcommands(sub))


def test_item_3_every_option_says_what_it_means_and_every_command_its_exit_codes():
    for name, sub in _subcommands(build_parser()):
        text = sub.format_help()
        assert "exit codes: 0" in text, name
        for action in sub._actions:
            if action.option_strings and action.help is not argparse.SUPPRESS and "-h" not in action.option_strings:
                assert action.help, f"rankwall {name} {action.option_strings[0]} has no help text"


def test_item_3_progress_goes_to_a_log_as_plain_lines():
    log = io.StringIO()
    progress = outputs.PlainProgress(Console(file=log), every=0.0)
    task = progress.add_task("verifying", total=3)
    progress.update(task, description="softmax-jacobian.psd  V=1024")
    progress.advance(task)
    assert log.getvalue().startswith("verifying: 1/3, softmax-jacobian.psd  V=1024, ")
    assert isinstance(outputs.progress_bar(Console(file=io.StringIO())), outputs.PlainProgress)


def test_item_4_the_margin_is_labelled_and_meaningful_at_zero(capsys):
    code, out, _ = run(capsys, "verify", "updates.eckart-young-attained", "--V", "2")
    assert code == EXIT_OK
    assert " abs" in out and "+1.0e+00" not in out
    _, out, _ = run(capsys, "verify", "compression.ky-fan", "--V", "64", "--examples", "0")
    assert " rel" in out and "relative to the larger side" in " ".join(out.split())


def test_item_5_a_row_that_ran_elsewhere_says_where(capsys):
    code, out, _ = run(capsys, "verify", "error-rank.wcdd", "--backend", "torch", "--dtype", "float32", "--V", "64")
    assert code == EXIT_OK and "[numpy/float64]" in out
    numpy = resolve("numpy")
    report = runner.verify(runner.plan([REGISTRY["error-rank.wcdd"]], [64], 0, 0), numpy, numpy)
    table = Console(width=200, record=True, color_system=None)
    table.print(verify_command.verify_table(report.reports, numpy, "t", 200))
    assert "[numpy/float64]" not in table.export_text()


def test_item_6_list_is_one_line_a_claim_and_shows_one_claim_whole(capsys):
    code, out, _ = run(capsys, "list")
    assert code == EXIT_OK and len(out.splitlines()) <= len(REGISTRY) + 3
    code, out, _ = run(capsys, "list", "softmax-jacobian.upper-bound")
    text = " ".join(out.split())
    assert "statement ‖J‖₂ ≤ 2m(1 − m)" in text and "constant-1.9:" in text and "upper bound" in text
    code, out, _ = run(capsys, "list", "--json")
    assert all("array_api" in c for c in json.loads(out))


def test_item_7_verify_ends_with_a_summary(capsys):
    code, out, _ = run(capsys, "verify", "softmax-jacobian.trace", "softmax-jacobian.rank", "--V", "16")
    last = out.strip().splitlines()[-1]
    assert code == EXIT_OK and last.endswith(" s")
    assert last.startswith("2 claims: 2 hold, 0 violated, 0 inconclusive, 0 unchecked; ")


def test_item_8_an_unknown_flag_gets_the_commands_usage(capsys):
    code, _, err = run(capsys, "verify", "--frobnicate")
    assert code == EXIT_USAGE and "usage: rankwall verify" in err and "unrecognized arguments: --frobnicate" in err


def test_item_12_a_meta_tensor_is_bad_input():
    torch = pytest.importorskip("torch")
    from rankwall.theory import softmax_jacobian as sj

    for function in (sj.spectral_norm, sj.trace, sj.entropy, sj.envelope, sj.support_size):
        with pytest.raises(InputError, match="meta device"):
            function(torch.empty(8, device="meta"))


def test_item_12_a_folder_where_a_figure_goes_is_bad_usage(capsys, tmp_path):
    (tmp_path / "batch_rank.png").mkdir()
    code, _, err = run(capsys, "experiment", "batch-rank", "--batch-sizes", "16", "--out", str(tmp_path))
    assert code == EXIT_USAGE and "is a folder" in err


def test_item_12_a_search_of_a_case_the_claim_cannot_build_is_rejected_not_a_crash(capsys):
    code, out, _ = run(capsys, "search", "softmax-jacobian.envelope-attained", "--budget", "60", "--json")
    assert code == EXIT_OK and json.loads(out)["rejected"] >= 0


def test_the_default_verify_says_what_it_checks_in_its_help():
    text = subprocess.run(
        [sys.executable, "-m", "rankwall.checks.cli", "verify", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "default size" in text and "--V N" in text


def test_a_claims_default_size_is_in_the_list_json(capsys):
    _, out, _ = run(capsys, "list", "--json")
    assert {c["default_V"] for c in json.loads(out)} <= {v for v in range(2, 2**24)}


@pytest.mark.parametrize("head", ["bad.npy"])
def test_argmax_on_a_missing_head_names_the_flag(capsys, tmp_path, head):
    code, _, err = run(capsys, "argmax", "--head", str(tmp_path / head))
    assert code == EXIT_USAGE and "--head" in err


def test_argmax_json_counts_the_argmaxable_tokens(capsys, tmp_path):
    path = tmp_path / "head.npy"
    np.save(path, np.random.default_rng(0).standard_normal((30, 2)))
    code, out, _ = run(capsys, "argmax", "--head", str(path), "--json")
    record = json.loads(out)
    assert code == EXIT_OK and record["argmaxable"] + len(record["unargmaxable"]) + len(record["undecided"]) == 30
