"""Mutation testing of ``theory/`` with cosmic-ray: the mutation score of each theory module.

Usage (outside the default test run: the configured sample, 8 mutants per module, took 22 minutes
on two shared cores; all of theory/'s ~10,800 mutants at 10-75 s each would take days)::

    pip install -e '.[mutation]'
    nice -n 19 python scripts/mutation.py                      # every module, sampled as configured
    nice -n 19 python scripts/mutation.py --modules heads updates --sample 0   # 0: every mutant
    nice -n 19 python scripts/mutation.py --before             # without tests/test_mutation_survivors.py
    nice -n 19 python scripts/mutation.py --rerun-survivors out/mutation/before
    python scripts/mutation.py --report out/mutation/before    # the table and JSON of a finished run

What it does, per module of ``scripts/mutation.toml``:

1. ``cosmic-ray init`` lists every mutant of the module (each operator at each place it applies).
   Mutants inside a type annotation are set aside as equivalent by construction: every module of
   ``theory/`` starts with ``from __future__ import annotations``, so annotations are never evaluated.
   When ``sample`` is positive, that many of the other mutants are drawn at random (seeded), and the
   rest are marked skipped, so the score is an estimate from a uniform sample (the table says so).
2. The tests run in scratch copies of the working tree (tracked and untracked, not ignored, files),
   one per worker, so an interrupted run never leaves a mutant in the checkout. ``rankwall``,
   ``rankwall.theory`` and ``rankwall.checks`` are imported from the copy: a ``sitecustomize`` on
   ``PYTHONPATH`` (inherited by subprocesses) maps them to the copy's folders as the editable install
   maps them to the checkout's (``[tool.setuptools.package-dir]`` of ``pyproject.toml``). Before any
   mutant runs, two checks make the run trustworthy, per module: the unmutated module
   passes the module's test selection (in the first copy: the copies are identical; its wall time
   sets the timeout), and a deliberately broken copy of the module (``raise RuntimeError`` appended)
   fails it in every copy, naming the canary: the tests import the file that is mutated.
   Either failing stops the run (exit 4).
3. ``cosmic-ray exec`` runs each shard of the sample in its copy, the workers in parallel; a mutant
   is *killed* when its test selection fails (or exceeds the timeout: counted as killed, listed as
   a timeout), *survives* when it passes, and is *incompetent* when it cannot be applied.

The table gives, per module: mutants generated, set aside as annotations, sampled, killed,
timeouts, survived, incompetent and the score killed / (killed + survived), timeouts among the
killed. ``--rerun-survivors RUN`` copies a finished run and runs its survivors again with the
current tests (the score after new tests: a killed mutant stays killed). Output: the table on
stdout, ``report.json`` (per module counts, score and each survivor's diff) in the run's folder,
and the JSON on stdout with ``--json``. Exit codes: 0 done, 2 bad usage, 4 the baseline failed
or a canary survived (the run would not be trustworthy).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = Path(__file__).with_suffix(".toml")
CANARY = "mutation canary: the tests import the mutated file"

SITECUSTOMIZE = '''"""Written by scripts/mutation.py: import rankwall from this scratch copy, not the checkout."""
import sys
from importlib.util import spec_from_file_location
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
_PACKAGES = {PACKAGES}


class _ScratchCopyFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = _PACKAGES.get(fullname)
        if folder is None:
            return None
        folder = _ROOT / folder
        return spec_from_file_location(fullname, folder / "__init__.py", submodule_search_locations=[str(folder)])


sys.meta_path.insert(0, _ScratchCopyFinder)
'''


class RunError(Exception):
    """A run that cannot be trusted: a failing baseline or a surviving canary."""


@dataclass(frozen=True)
class ModuleSpec:
    """One theory module and the pytest arguments of the tests that exercise it."""

    name: str
    path: str  # relative to the repository root
    tests: tuple[str, ...]

    def pytest_arguments(self, survivor_tests: str | None) -> list[str]:
        """The module's tests, after its class in ``survivor_tests`` where that file defines one (first,
        so that ``-x`` stops a mutant they kill within seconds; the selection's ``-k`` covers them too)."""
        extra = []
        if survivor_tests and (ROOT / survivor_tests).exists():
            tree = ast.parse((ROOT / survivor_tests).read_text())
            classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
            extra = [f"{survivor_tests}::{self.survivor_class}"] if self.survivor_class in classes else []
        return [*extra, *self.tests]

    @property
    def survivor_class(self) -> str:
        """``TestSoftmaxJacobian`` for ``softmax_jacobian``: the module's class in the survivors' tests."""
        return "Test" + "".join(part.capitalize() for part in self.name.strip("_").split("_"))


def load_config(path: Path) -> tuple[dict, list[ModuleSpec]]:
    """The run settings and the module specs of ``scripts/mutation.toml``."""
    with path.open("rb") as handle:
        config = tomllib.load(handle)
    modules = [ModuleSpec(name, spec["path"], tuple(spec["tests"])) for name, spec in config.pop("modules").items()]
    return config, modules


def package_folders(root: Path) -> dict[str, str]:
    """The import name -> folder map of the editable install: ``rankwall`` plus ``package-dir``."""
    with (root / "pyproject.toml").open("rb") as handle:
        package_dir = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    return {"rankwall": "rankwall", **package_dir}


def tracked_files(root: Path) -> list[str]:
    """Files of the working tree that git tracks or would track (untracked, not ignored)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        check=True,
        capture_output=True,
    ).stdout.decode()
    return sorted({name for name in listing.split("\0") if name and (root / name).is_file()})


def make_copy(root: Path, destination: Path) -> Path:
    """A scratch copy of the working tree whose ``sitecustomize`` imports rankwall from it."""
    for name in tracked_files(root):
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    shim = destination / ".mutation-import"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE.replace("{PACKAGES}", repr(package_folders(root))))
    return destination


def copy_environment(copy: Path) -> dict[str, str]:
    """The environment of a worker in ``copy``: its import shim first on ``PYTHONPATH``, CI profile."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(copy / ".mutation-import"), env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant written within the second of another must not reuse its .pyc
    env["CI"] = "true"  # the CI Hypothesis profile
    return env


def test_command(spec: ModuleSpec, survivor_tests: str | None, pytest_options: list[str]) -> list[str]:
    return [sys.executable, "-m", "pytest", *pytest_options, *spec.pytest_arguments(survivor_tests)]


def run_tests(command: list[str], copy: Path, timeout: float | None = None) -> tuple[int, str, float]:
    """``(exit status, output, wall seconds)`` of the test command in a copy."""
    start = time.perf_counter()
    done = subprocess.run(
        command, cwd=copy, env=copy_environment(copy), capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - start


@contextmanager
def replaced(path: Path, text: str) -> Iterator[None]:
    """``path`` holding ``text`` for the duration of the block, then its own content again."""
    original = path.read_text()
    try:
        path.write_text(text)
        yield
    finally:
        path.write_text(original)


def check_baseline(spec: ModuleSpec, copy: Path, command: list[str]) -> float:
    """The unmutated module passes its tests in ``copy``; returns their wall time. Raises
    :class:`RunError` otherwise."""
    status, output, seconds = run_tests(command, copy)
    if status != 0:
        raise RunError(f"{spec.name}: the unmutated module fails its tests in {copy}:\n{output[-3000:]}")
    return seconds


def check_canary(spec: ModuleSpec, copy: Path, command: list[str]) -> None:
    """A broken copy of the module (``raise RuntimeError`` appended) fails the tests, naming the
    canary: the tests import the file of ``copy`` that is mutated. Raises :class:`RunError` otherwise."""
    module = copy / spec.path
    with replaced(module, module.read_text() + f"\nraise RuntimeError({CANARY!r})\n"):
        status, output, _ = run_tests(command, copy)
    if status == 0 or CANARY not in output:
        raise RunError(f"{spec.name}: a broken {spec.path} was not caught: the tests do not import the mutated file")


def check_copies(spec: ModuleSpec, copies: list[Path], command: list[str]) -> float:
    """The baseline in the first copy (the copies are identical), then the canary there, while the
    canary runs in the other copies; returns the baseline's wall time."""

    def first_copy() -> float:
        seconds = check_baseline(spec, copies[0], command)
        check_canary(spec, copies[0], command)
        return seconds

    with ThreadPoolExecutor(len(copies)) as pool:
        baseline = pool.submit(first_copy)
        canaries = [pool.submit(check_canary, spec, copy, command) for copy in copies[1:]]
        for canary in canaries:
            canary.result()
        return baseline.result()


# --------------------------------------------------------------------------- sessions


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``((line, column), (end line, end column))`` of every annotation of a module."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        annotations = []
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            annotations.append(node.annotation)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
            annotations.append(node.returns)
        spans += [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in annotations]
    return spans


def cosmic_ray_config(spec: ModuleSpec, command: list[str], timeout: float) -> str:
    """The TOML configuration of one module's session (local distributor: one worker per shard)."""
    import shlex

    return (
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(spec.path)}\n"
        f"timeout = {timeout:.1f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(shlex.join(command))}\n"
        '\n[cosmic-ray.distributor]\nname = "local"\n'
    )


def cosmic_ray(*arguments: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    executable = Path(sys.executable).with_name("cosmic-ray")
    done = subprocess.run([str(executable), *arguments], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        command = " ".join(arguments)
        raise RuntimeError(f"cosmic-ray {command} (in {cwd}) exited {done.returncode}:\n{done.stderr[-3000:]}")


def mutants(session: Path) -> list[tuple[str, str, int, int, int]]:
    """``(job id, operator, occurrence, line, column)`` of every mutant of a session, in a stable order."""
    with sqlite3.connect(session) as db:
        rows = db.execute(
            "select job_id, operator_name, occurrence, start_pos_row, start_pos_col from mutation_specs"
        ).fetchall()
    return sorted(rows, key=lambda row: (row[3], row[4], row[1], row[2]))


def mark_skipped(session: Path, job_ids: list[str], reason: str) -> None:
    """Give ``job_ids`` a result of ``skipped`` (as cosmic-ray's own filters do), with ``reason``."""
    with sqlite3.connect(session) as db:
        db.executemany(
            "insert into work_results (worker_outcome, output, test_outcome, diff, job_id) values (?, ?, ?, ?, ?)",
            [("SKIPPED", reason, None, None, job) for job in job_ids],
        )


def keep_only(session: Path, job_ids: set[str]) -> None:
    """Delete from a session every mutant but ``job_ids`` (a shard keeps its share of the sample)."""
    with sqlite3.connect(session) as db:
        others = [(job,) for (job,) in db.execute("select job_id from work_items") if job not in job_ids]
        for table in ("work_results", "mutation_specs", "work_items"):
            db.executemany(f"delete from {table} where job_id = ?", others)


def prepare_module(
    spec: ModuleSpec, run_dir: Path, command: list[str], timeout: float, sample: int, seed: int, shards: int
) -> dict:
    """Create the module's session, set annotation mutants aside, sample, and split into shards.
    Returns the module's counts before execution."""
    module_dir = run_dir / spec.name
    module_dir.mkdir(parents=True)
    config = module_dir / "cosmic-ray.toml"
    config.write_text(cosmic_ray_config(spec, command, timeout))
    full = module_dir / "all.sqlite"
    cosmic_ray("init", str(config), str(full), cwd=ROOT)
    every = mutants(full)
    spans = annotation_spans((ROOT / spec.path).read_text())
    inside = {job for job, _, _, line, column in every if any(a <= (line, column) < b for a, b in spans)}
    candidates = [row[0] for row in every if row[0] not in inside]
    chosen = candidates if sample <= 0 or sample >= len(candidates) else random.Random(seed).sample(candidates, sample)
    chosen_set = set(chosen)
    mark_skipped(full, sorted(inside), "annotation: not evaluated (from __future__ import annotations)")
    mark_skipped(full, [job for job in candidates if job not in chosen_set], "not sampled")
    for k in range(shards):
        shard = module_dir / f"shard-{k}.sqlite"
        shutil.copy(full, shard)
        keep_only(shard, set(chosen[k::shards]))
    return {"generated": len(every), "annotations": len(inside), "sampled": len(chosen)}


def execute_shard(config: Path, shard: Path, copy: Path) -> None:
    cosmic_ray("exec", str(config), str(shard), cwd=copy, env=copy_environment(copy))


def run_modules(specs: list[ModuleSpec], run_dir: Path, copies: list[Path]) -> None:
    """Execute every module's shards, shard k in copy k, the copies in parallel."""
    failures: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for spec in specs:
                module_dir = run_dir / spec.name
                execute_shard(module_dir / "cosmic-ray.toml", module_dir / f"shard-{k}.sqlite", copies[k])
        except BaseException as error:  # reported after the other workers finish
            failures.append(error)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(copies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


# --------------------------------------------------------------------------- report


def module_report(module_dir: Path) -> dict:
    """Counts, score and survivors of one module from its shards."""
    counts = json.loads((module_dir / "counts.json").read_text())
    killed = timeouts = survived = incompetent = pending = 0
    survivors = []
    for shard in sorted(module_dir.glob("shard-*.sqlite")):
        with sqlite3.connect(shard) as db:
            rows = db.execute(
                "select s.job_id, s.operator_name, s.occurrence, s.start_pos_row, s.start_pos_col, "
                "r.worker_outcome, r.test_outcome, r.output, r.diff from mutation_specs s "
                "left join work_results r on r.job_id = s.job_id"
            ).fetchall()
        for job, operator, occurrence, line, column, worker, outcome, output, diff in rows:
            if worker is None:
                pending += 1
            elif outcome == "KILLED" and output == "timeout":
                timeouts += 1
            elif outcome == "KILLED":
                killed += 1
            elif outcome == "SURVIVED":
                survived += 1
                survivors.append(
                    {
                        "job_id": job,
                        "operator": operator,
                        "occurrence": occurrence,
                        "line": line,
                        "column": column,
                        "diff": diff,
                        "shard": shard.name,
                    }
                )
            else:
                incompetent += 1
    detected = killed + timeouts
    decided = detected + survived
    survivors.sort(key=lambda s: (s["line"], s["column"], s["operator"]))
    return {
        **counts,
        "killed": killed,
        "timeouts": timeouts,
        "survived": survived,
        "incompetent": incompetent,
        "pending": pending,
        "score": detected / decided if decided else None,
        "survivors": survivors,
    }


def report(run_dir: Path) -> dict:
    meta = json.loads((run_dir / "run.json").read_text())
    modules = {d.name: module_report(d) for d in sorted(run_dir.iterdir()) if (d / "counts.json").exists()}
    return {**meta, "modules": modules}


def print_table(result: dict) -> None:
    header = ("module", "mutants", "annot.", "sampled", "killed", "timeouts", "survived", "incomp.", "score")
    print(" ".join(f"{h:>9}" if i else f"{h:<17}" for i, h in enumerate(header)))
    for name, m in result["modules"].items():
        score = "-" if m["score"] is None else f"{m['score']:.1%}"
        cells = (m["generated"], m["annotations"], m["sampled"], m["killed"], m["timeouts"], m["survived"])
        print(f"{name:<17} " + " ".join(f"{c:>9}" for c in (*cells, m["incompetent"], score)))
    sample = result["sample"]
    how = "every mutant" if sample <= 0 else f"a uniform sample of {sample} per module (seed {result['seed']})"
    print(
        f"\n{how}; score = killed / (killed + survived), timeouts counted as killed; "
        f"{result['workers']} workers, wall {result['wall_seconds'] / 60:.1f} min"
    )


def write_report(run_dir: Path, as_json: bool) -> dict:
    result = report(run_dir)
    (run_dir / "report.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2) if as_json else "", end="\n" if as_json else "")
    if not as_json:
        print_table(result)
    return result


# --------------------------------------------------------------------------- main


def selected_modules(all_specs: list[ModuleSpec], names: list[str] | None) -> list[ModuleSpec]:
    if not names:
        return all_specs
    known = {spec.name: spec for spec in all_specs}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SystemExit(f"--modules: unknown module(s) {', '.join(unknown)} (choose from {', '.join(known)})")
    return [known[name] for name in names]


def fresh_run(args: argparse.Namespace, settings: dict, specs: list[ModuleSpec]) -> Path:
    run_dir = Path(args.out).resolve()
    if run_dir.exists():
        raise SystemExit(f"--out: {run_dir} exists; choose a new folder")
    survivor_tests = None if args.before else settings["survivor_tests"]
    if survivor_tests and not (ROOT / survivor_tests).exists():
        raise SystemExit(f"{survivor_tests} does not exist: run with --before")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rankwall-mutation-") as scratch:
        copies = [make_copy(ROOT, Path(scratch) / f"copy-{k}") for k in range(args.workers)]
        for spec in specs:
            command = test_command(spec, survivor_tests, settings["pytest_options"])
            baseline = check_copies(spec, copies, command)
            timeout = max(settings["min_timeout"], settings["timeout_factor"] * baseline)
            counts = prepare_module(spec, run_dir, command, timeout, args.sample, args.seed, args.workers)
            counts |= {"baseline_seconds": round(baseline, 1), "timeout_seconds": round(timeout, 1)}
            (run_dir / spec.name / "counts.json").write_text(json.dumps(counts) + "\n")
            print(f"{spec.name}: {counts}", file=sys.stderr, flush=True)
        write_meta(run_dir, args, survivor_tests, specs, start, running=True)
        run_modules(specs, run_dir, copies)
    write_meta(run_dir, args, survivor_tests, specs, start)
    return run_dir


def survivor_count(module_dir: Path) -> int:
    """The number of surviving mutants in a module's shards."""
    count = 0
    for shard in module_dir.glob("shard-*.sqlite"):
        with sqlite3.connect(shard) as db:
            count += db.execute("select count(*) from work_results where test_outcome = 'SURVIVED'").fetchone()[0]
    return count


def rerun_survivors(args: argparse.Namespace, settings: dict, specs: list[ModuleSpec]) -> Path:
    """Copy a finished run, forget its survivors' results, and run them again with the current tests
    (the modules without survivors are reported as they were)."""
    source, run_dir = Path(args.rerun_survivors).resolve(), Path(args.out).resolve()
    if run_dir.exists():
        raise SystemExit(f"--out: {run_dir} exists; choose a new folder")
    shutil.copytree(source, run_dir)
    survivor_tests = settings["survivor_tests"]
    start = time.perf_counter()
    names = {spec.name for spec in specs}
    rerun = [spec for spec in specs if (run_dir / spec.name).exists() and survivor_count(run_dir / spec.name)]
    with tempfile.TemporaryDirectory(prefix="rankwall-mutation-") as scratch:
        shards = len(list((run_dir / rerun[0].name).glob("shard-*.sqlite"))) if rerun else 0
        copies = [make_copy(ROOT, Path(scratch) / f"copy-{k}") for k in range(shards)]
        for spec in rerun:
            command = test_command(spec, survivor_tests, settings["pytest_options"])
            baseline = check_copies(spec, copies, command)
            timeout = max(settings["min_timeout"], settings["timeout_factor"] * baseline)
            module_dir = run_dir / spec.name
            (module_dir / "cosmic-ray.toml").write_text(cosmic_ray_config(spec, command, timeout))
            for shard in module_dir.glob("shard-*.sqlite"):
                with sqlite3.connect(shard) as db:
                    db.execute("delete from work_results where test_outcome = 'SURVIVED'")
        run_modules(rerun, run_dir, copies)
    for module_dir in run_dir.iterdir():
        if module_dir.is_dir() and module_dir.name not in names:
            shutil.rmtree(module_dir)
    write_meta(run_dir, args, survivor_tests, rerun, start, rerun_of=str(source))
    return run_dir


def write_meta(
    run_dir: Path,
    args: argparse.Namespace,
    survivor_tests: str | None,
    specs: list[ModuleSpec],
    start: float,
    *,
    running: bool = False,
    rerun_of: str | None = None,
) -> None:
    previous = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    meta = {
        "tool": "cosmic-ray "
        + subprocess.run(
            [str(Path(sys.executable).with_name("cosmic-ray")), "--version"], capture_output=True, text=True
        ).stdout.split()[-1],
        "sample": previous.get("sample", args.sample),
        "seed": previous.get("seed", args.seed),
        "workers": args.workers if not rerun_of else previous.get("workers", args.workers),
        "survivor_tests": survivor_tests,
        "tests": {spec.name: spec.pytest_arguments(survivor_tests) for spec in specs},
        "wall_seconds": round(time.perf_counter() - start, 1),
        "running": running,
    }
    if rerun_of:
        meta |= {"rerun_of": rerun_of, "wall_seconds_before": previous.get("wall_seconds")}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: remove the scratch copies
    settings, all_specs = load_config(CONFIG)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", nargs="+", help="theory modules to mutate (default: all in mutation.toml)")
    parser.add_argument("--sample", type=int, default=settings["sample"], help="mutants per module (0: all)")
    parser.add_argument("--seed", type=int, default=settings["seed"], help="seed of the sample")
    parser.add_argument("--workers", type=int, default=settings["workers"], help="scratch copies run in parallel")
    parser.add_argument("--before", action="store_true", help=f"leave out {settings['survivor_tests']}")
    parser.add_argument("--rerun-survivors", metavar="RUN", help="run the survivors of a finished run again")
    parser.add_argument("--report", metavar="RUN", help="print the report of a finished run and exit")
    parser.add_argument("--out", default=None, help="the run's folder (default: out/mutation/<timestamp>)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers: need at least 1")
    if args.report:
        if not (Path(args.report) / "run.json").exists():
            parser.error(f"--report: {args.report} is not a finished run (no run.json)")
        write_report(Path(args.report), args.json)
        return 0
    specs = selected_modules(all_specs, args.modules)
    args.out = args.out or str(ROOT / "out" / "mutation" / time.strftime("%Y%m%d-%H%M%S"))
    try:
        run_dir = rerun_survivors(args, settings, specs) if args.rerun_survivors else fresh_run(args, settings, specs)
    except RunError as error:
        print(f"mutation: {error}", file=sys.stderr)
        return 4
    write_report(run_dir, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
