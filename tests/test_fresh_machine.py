"""A bare clone works, and no failure looks like a verdict (issue 10): the project carries its own
data, CI runs the README's test command in a fresh clone, exit codes cannot be confused, a backend
that fails is an answer, input is checked before heavy work, and output stays legible."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from rankwall.checks.cli import EXIT_BROKEN_PIPE, EXIT_INCONCLUSIVE, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, main
from rankwall.checks.cli.commands import commands
from rankwall.checks.cli.commands import compress as compress_command
from rankwall.checks.cli.commands import spot as spot_command
from rankwall.checks.cli.commands import verify as verify_command
from rankwall.checks.companion import data
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import NUMERICAL_FAILURE, REGISTRY, Status
from rankwall.checks.run import runner
from rankwall.checks.run.outputs import write_outputs
from rankwall.theory.validation import InputError

ROOT = Path(__file__).resolve().parents[1]


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class TestTheProjectCarriesItsData:
    """Nothing in the project reads the development folder beside the checkout: a user's clone has
    only the repository and the package registries."""

    @pytest.mark.parametrize("name", sorted(data.CORPORA))
    def test_every_corpus_is_shipped_and_verified(self, name, monkeypatch):
        monkeypatch.delenv(data.DATA_VARIABLE, raising=False)
        text = data.read_corpus(name)
        assert len(text) > 1_000_000

    def test_a_corpus_whose_hash_differs_is_refused(self, monkeypatch):
        monkeypatch.delenv(data.DATA_VARIABLE, raising=False)
        monkeypatch.setitem(data.CORPORA, "tinyshakespeare.txt", "0" * 64)
        with pytest.raises(InputError, match=r"tinyshakespeare.txt.xz has sha256 86c4e6aa"):
            data.read_corpus("tinyshakespeare.txt")

    def test_a_users_own_corpus_comes_in_through_the_variable(self, tmp_path, monkeypatch):
        (tmp_path / "tinyshakespeare.txt").write_text("my own text")
        monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
        assert data.read_corpus("tinyshakespeare.txt") == "my own text"
        with pytest.raises(InputError, match=r"RANKWALL_DATA: .*wikitext-2.valid.txt is missing"):
            data.read_corpus("wikitext-2.valid.txt")

    def test_the_notice_names_source_licence_and_hash_of_every_corpus(self):
        notice = (ROOT / "checks" / "companion" / "corpora" / "NOTICE.md").read_text()
        for name, digest in data.CORPORA.items():
            assert f"{name}.xz" in notice and digest in notice
        assert "CC BY-SA 3.0" in notice and "public domain" in notice

    def test_no_tracked_file_reads_the_development_folder(self):
        tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
        offenders = []
        for name in tracked.stdout.split():
            path = ROOT / name
            if path.suffix in {".py", ".md", ".toml", ".sh", ".json", ".txt", ""} and path.is_file():
                text = path.read_text(errors="replace")
                if re.search(r"\.\./shared|shared[/]data", text):
                    offenders.append(name)
        assert offenders == []

    def test_the_corpora_go_into_the_package(self):
        pyproject = (ROOT / "pyproject.toml").read_text()
        assert '"rankwall.checks.companion" = ["corpora/*.xz", "corpora/NOTICE.md"]' in pyproject


class TestCIIsAFreshCloneCheck:
    def test_ci_runs_the_readme_test_command_in_a_fresh_clone(self):
        script = (ROOT / ".ci" / "run").read_text()
        assert "git clone" in script and "mktemp -d" in script
        extract = re.search(r"command=\"\$\(awk '(.+?)' ", script).group(1)
        command = subprocess.run(
            ["awk", extract, str(ROOT / "README.md")], capture_output=True, text=True, check=True
        ).stdout.strip()
        readme = (ROOT / "README.md").read_text()
        assert command.startswith("pip install torch==2.13.0 && ") and command.endswith("python -m pytest")
        assert f"```bash\n{command}\n```" in readme


class TestExitCodesCannotBeConfused:
    def test_an_internal_error_is_not_a_violation(self, capsys, monkeypatch):
        def broken(args, out, err):
            raise RuntimeError("a bug")

        monkeypatch.setattr(commands()["list"], "run", broken)
        code, _, err = run(capsys, "list")
        assert code == EXIT_INTERNAL != 1
        assert "internal error: RuntimeError: a bug" in err and "Traceback" not in err and "--debug" in err
        code, _, err = run(capsys, "--debug", "list")
        assert code == EXIT_INTERNAL and "Traceback" in err
        code, _, err = run(capsys, "list", "--debug")
        assert code == EXIT_INTERNAL and "Traceback" in err

    @pytest.mark.parametrize("argv", [["list", "--json"], ["list"], ["list", "--quantities"]])
    def test_a_closed_pipe_ends_quietly(self, argv):
        """A reader that stops early (``| head -1``): the table (rich's console, whose own answer is
        ``SystemExit(1)``, a violated claim's code) and the JSON end with 0 or 141, and say nothing."""
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; from rankwall.checks.cli import main; sys.exit(main())", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        process.stdout.read(10)
        process.stdout.close()
        stderr = process.stderr.read().decode()
        assert process.wait(timeout=120) in (EXIT_OK, EXIT_BROKEN_PIPE)
        assert stderr == ""

    @pytest.mark.parametrize("argv", [["list"], ["list", "--quantities", "--json"], ["list", "error-rank.wcdd"]])
    def test_an_output_without_unicode_gets_escapes_not_an_error(self, argv):
        """Under PYTHONIOENCODING=ascii (or a Latin-1 locale) the statements' − and Σ are written as
        backslash escapes; the command does not end in UnicodeEncodeError."""
        listed = subprocess.run(
            [sys.executable, "-c", "import sys; from rankwall.checks.cli import main; sys.exit(main())", *argv],
            capture_output=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONIOENCODING": "ascii"},
            timeout=120,
        )
        assert listed.returncode == EXIT_OK and listed.stderr == b""
        assert b"\\u" in listed.stdout or b"\\x" in listed.stdout

    def test_version(self, capsys):
        code, out, _ = run(capsys, "--version")
        assert code == EXIT_OK and out.startswith("rankwall ")


class TestABackendThatFailsIsAnAnswer:
    def test_a_failing_eigensolver_gives_inconclusive(self, capsys, monkeypatch):
        """torch's float32 eigh fails to converge with MKL on some AVX-512 CPUs; a NaN matrix makes
        it fail everywhere. The instance is undecided, never violated, and the run does not crash."""
        import torch

        from rankwall.checks.claims import compression as claims

        real = claims.smallest_singular_value  # an eigenproblem of the head's Gram matrix, in the backend
        monkeypatch.setattr(claims, "smallest_singular_value", lambda S: real(S * torch.nan))
        code, out, _ = run(capsys, "verify", "compression.pythagoras", "--backend", "torch", "--dtype", "float32",
                           "--V", "64", "--json")  # fmt: skip
        verdict = next(v for v in json.loads(out) if v["status"] != "holds")
        assert code == EXIT_INCONCLUSIVE and verdict["status"] == "inconclusive"
        assert verdict["method"].startswith(NUMERICAL_FAILURE) and "LinAlgError" in verdict["method"]

    def test_an_overflow_in_a_measurement_is_inconclusive(self, numpy_backend, monkeypatch):
        claim = REGISTRY["softmax-jacobian.upper-bound"]

        def overflowing(ctx):
            raise OverflowError("integer division result too large for a float")

        monkeypatch.setattr(claim.sides.lhs, "measure_fn", overflowing)  # ‖J‖₂, measured in the backend
        verdict = claim.check(claim.witnesses(16)[0], numpy_backend)
        assert verdict.status is Status.INCONCLUSIVE and "OverflowError" in verdict.method

    def test_a_bug_is_not_hidden_as_inconclusive(self, numpy_backend, monkeypatch):
        claim = REGISTRY["softmax-jacobian.upper-bound"]

        def buggy(ctx):
            raise KeyError("a bug")

        monkeypatch.setattr(claim.sides.lhs, "measure_fn", buggy)
        with pytest.raises(KeyError):
            claim.check(claim.witnesses(16)[0], numpy_backend)

    @pytest.mark.parametrize(
        ("argv", "message"),
        [
            (["verify", "softmax-jacobian.psd", "--backend", "torch", "--device", "bogus"], "--device: torch has no"),
            (["verify", "softmax-jacobian.psd", "--device", "cuda"], "--device: numpy runs on the cpu only"),
            (["search", "softmax-jacobian.upper-bound", "--tighten", "1e400"], "argument --tighten: 1e400 is out"),
            (["search", "softmax-jacobian.upper-bound", "--tighten", "1e-400"], "argument --tighten: 1e-400 is out"),
            (["search", "softmax-jacobian.kernel", "--tighten", "2"], "--tighten: softmax-jacobian.kernel is an id"),
        ],
    )
    def test_arguments_a_backend_cannot_use_are_refused(self, capsys, argv, message):
        code, _, err = run(capsys, *argv)
        assert code == EXIT_USAGE and message in err and "Traceback" not in err


class TestInputIsCheckedBeforeHeavyWork:
    def test_spot_checks_text_and_out_before_loading_the_model(self, capsys, tmp_path, monkeypatch):
        from rankwall.checks.models import loading

        def never(*args, **kwargs):
            raise AssertionError("the model was loaded before the arguments were checked")

        monkeypatch.setattr(loading, "load_causal_lm", never)
        code, _, err = run(capsys, "spot", "--text", str(tmp_path / "absent.txt"))
        assert code == EXIT_USAGE and "--text:" in err and "does not exist" in err
        binary = tmp_path / "binary.txt"
        binary.write_bytes(b"\xff\xfe\x00")
        code, _, err = run(capsys, "spot", "--text", str(binary))
        assert code == EXIT_USAGE and "is not UTF-8 text" in err
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        code, _, err = run(capsys, "spot", "--out", str(blocker))
        assert code == EXIT_USAGE and "--out:" in err and "is not a folder" in err

    def test_experiments_check_out_before_they_run(self, capsys, tmp_path, monkeypatch):
        blocker = tmp_path / "a-file"
        blocker.write_text("")
        from rankwall.checks.experiments import spamlang

        monkeypatch.setattr(spamlang, "main", lambda *a: pytest.fail("ran before checking --out"))
        code, _, err = run(capsys, "experiment", "spamlang", "--out", str(blocker / "inside"))
        assert code == EXIT_USAGE and "--out:" in err

    @pytest.mark.parametrize(
        ("argv", "flag"),
        [
            (["experiment", "batch-rank", "--steps", "3"], "--steps"),
            (["experiment", "spamlang", "--batch-sizes", "64"], "--batch-sizes"),
            (["experiment", "lowrank-heads", "--batch-sizes", "64"], "--batch-sizes"),
        ],
    )
    def test_flags_that_do_not_apply_are_refused(self, capsys, tmp_path, argv, flag):
        """Each experiment has its own flags: another's is an unrecognised argument."""
        code, _, err = run(capsys, *argv, "--out", str(tmp_path))
        assert code == EXIT_USAGE and "unrecognized arguments" in err and flag in err

    def test_a_failed_plot_leaves_no_partial_output(self, tmp_path):
        def failing(data, path):
            path.write_bytes(b"half a png")
            raise RuntimeError("the plot failed")

        with pytest.raises(RuntimeError):
            write_outputs({"a": 1}, tmp_path, "record", failing)
        assert list(tmp_path.iterdir()) == []

    def test_outputs_replace_an_old_record_whole(self, tmp_path):
        def plot(data, path):
            path.write_bytes(b"png")

        write_outputs({"run": 1}, tmp_path, "record", plot)
        write_outputs({"run": 2}, tmp_path, "record", plot)
        assert json.loads((tmp_path / "record.json").read_text()) == {"run": 2}
        assert sorted(p.name for p in tmp_path.iterdir()) == ["record.json", "record.png"]

    def test_an_unknown_pattern_is_an_error_even_beside_a_known_one(self, capsys):
        code, _, err = run(capsys, "verify", "softmax-jacobian.psd", "no-such-claim")
        assert code == EXIT_USAGE and "'no-such-claim'" in err and "softmax-jacobian.psd'" not in err

    @pytest.mark.parametrize("V", ["2", "3"])
    def test_the_smallest_vocabularies_run(self, capsys, V):
        code, out, _ = run(capsys, "verify", "softmax-jacobian.*", "heads.*", "--V", V, "--examples", "1", "--json")
        verdicts = json.loads(out)
        assert code == EXIT_OK
        unchecked = {v["claim"] for v in verdicts if v["status"] == "unchecked"}
        assert unchecked or V == "3", "some constructions need more than 2 tokens; they must say so, not crash"
        assert all(v["reason"] == f"no instance at V = {V}" for v in verdicts if v["status"] == "unchecked")
        assert {v["status"] for v in verdicts} <= {"holds", "unchecked"}

    def test_compress_refuses_a_size_that_cannot_fit(self, capsys, monkeypatch):
        monkeypatch.setattr(compress_command, "available_memory_bytes", lambda: 2**30)
        code, _, err = run(capsys, "compress", "--V", "131072", "--D", "4096", "--tokens", "16")
        from rankwall.theory.compression import compression_memory_bytes

        needed = compression_memory_bytes(131072, 4096, 16) / 2**30
        assert needed > 1 and code == EXIT_USAGE and f"needs about {needed:.1f} GiB" in err and "only 1.0 GiB" in err


class TestOutputPeopleCanRead:
    def test_verify_table_is_legible_at_80_columns(self):
        claim = REGISTRY["softmax-jacobian.upper-bound"]
        numpy = resolve("numpy")
        report = runner.verify(runner.plan([claim], [16], 0, 0)[:1], numpy, numpy)
        console = Console(width=80, record=True, color_system=None)
        console.print(verify_command.verify_table(report.reports, numpy, "t", 80))
        text = console.export_text()
        assert max(len(line) for line in text.splitlines()) <= 80
        method = report.reports[0].verdict.method
        first_column = " ".join(line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│"))
        assert method in first_column  # the method is not crushed into 5-character pieces

    def test_argmax_prints_a_table(self, capsys, tmp_path):
        head = tmp_path / "head.npy"
        np.save(head, np.random.default_rng(101).standard_normal((40, 3)))
        code, out, _ = run(capsys, "argmax", "--head", str(head))
        assert code == EXIT_OK
        assert "{" not in out and "never the argmax" in out and "method" in out

    def test_search_reports_examples_within_the_budget(self, capsys):
        code, out, _ = run(capsys, "search", "softmax-jacobian.upper-bound", "--budget", "40", "--json")
        result = json.loads(out)
        assert code == EXIT_OK and not result["found"]
        assert result["examples"] <= result["budget"] == 40
        code, out, _ = run(capsys, "search", "softmax-jacobian.upper-bound", "--budget", "40")
        assert re.search(r"in \d+ examples of a budget of 40", " ".join(out.split()))

    def test_argparse_names_the_flag_once(self, capsys):
        code, _, err = run(capsys, "verify", "--V", "-5")
        last = err.splitlines()[-1]
        assert code == EXIT_USAGE and last.count("--V") == 1 and "argument --V: -5 is out of range" in last

    def test_spot_puts_squares_under_their_own_headings(self):
        record = json.loads((ROOT / "docs" / "_static" / "spot" / "spot.json").read_text())
        console = Console(width=120, record=True, color_system=None)
        spot_command.print_spot(record, console)
        header = next(line for line in console.export_text().splitlines() if "variant" in line)
        assert re.findall(r"\w+²?", header) == ["variant", "destroyed", "cosine", "destroyed²", "cosine²"]


def test_verify_reports_the_largest_instance_it_checked(capsys):
    """--V is a request; each claim reports the largest vocabulary it actually checked (issue 11)."""
    code, out, _ = run(capsys, "verify", "expressivity.argmaxable-vs-hull", "softmax-jacobian.kernel", "--V", "3",
                       "--examples", "0", "--json")  # fmt: skip
    largest = {v["claim"]: v["largest_V"] for v in json.loads(out)}
    assert code == EXIT_OK
    # the hull claim's witnesses in D = 5 have at least D + 3 = 8 rows, whatever V is asked
    assert largest == {"expressivity.argmaxable-vs-hull": 8, "softmax-jacobian.kernel": 3}


def test_the_distribution_claims_no_generic_import_name(tmp_path):
    """The two folders install as rankwall.theory and rankwall.checks; `import theory` and
    `import checks` find nothing outside the checkout (issue 11)."""
    probe = (
        "import importlib.util, rankwall, rankwall.theory, rankwall.checks.cli; "
        "print(importlib.util.find_spec('theory'), importlib.util.find_spec('checks'), rankwall.InputError.__module__)"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["None", "None", "rankwall.errors"]
