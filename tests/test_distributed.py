"""Beyond one machine: ``verify`` and ``search`` on a Dask cluster give the serial answers, share
their counterexamples through one example database, and fail clearly where dask is missing."""

from __future__ import annotations

import json
import sys
from fractions import Fraction

import pytest

from rankwall.checks.cli import EXIT_OK, EXIT_USAGE, EXIT_VIOLATED, main
from rankwall.checks.engine.backends import resolve
from rankwall.checks.engine.verdict import REGISTRY
from rankwall.checks.run import distributed as dist
from rankwall.checks.run import runner
from rankwall.checks.run.search import SearchResult, database_folder, search

NUMPY = resolve("numpy")
#: A planted mutant that a fresh search at budget 1 does not refute, so refuting it there is a replay.
MUTANT = ("softmax-jacobian.lower-bound", "factor-1.1")


def run(capsys, *argv):
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def without_seconds(records):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


@pytest.mark.parametrize("flag", [("--workers", "2"), ("--scheduler", "tcp://127.0.0.1:1")])
@pytest.mark.parametrize("command", [("verify", "softmax-jacobian.trace"), ("search", "softmax-jacobian.trace")])
def test_without_dask_the_flags_are_usage_errors(capsys, monkeypatch, command, flag):
    """Dask is optional: its flags say what to install instead of crashing."""
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    code, out, err = run(capsys, *command, *flag)
    assert code == EXIT_USAGE and out == ""
    assert flag[0] in err and dist.INSTALL in err


def test_workers_and_scheduler_exclude_each_other(capsys):
    code, _, err = run(capsys, "verify", "softmax-jacobian.trace", "--workers", "2", "--scheduler", "tcp://x:1")
    assert code == EXIT_USAGE and "not allowed with" in err


def test_the_lowest_seed_that_found_one_is_reported():
    """The reported search does not depend on which worker finished first."""
    found = search(REGISTRY[MUTANT[0]].mutants[MUTANT[1]], NUMPY, seed=3)
    missed = SearchResult("c", Fraction(1), 1, 0, 1, 0, 0, 0.0, None)
    other = SearchResult("c", Fraction(1), 1, 5, 1, 0, 0, 0.0, found.counterexample)
    assert dist.first_found([other, missed, found]) is found
    assert dist.first_found([missed]) is missed


def test_the_database_separates_claims_factors_and_backends():
    claim = REGISTRY["softmax-jacobian.upper-bound"]
    folders = {
        database_folder("/db", c, b, f)
        for c in (claim, claim.mutants["constant-1.9"])
        for b in (NUMPY, resolve("numpy", None, "float32"))
        for f in (Fraction(1), Fraction(1, 2))
    }
    assert len(folders) == 8


def test_a_stored_counterexample_is_replayed_first(tmp_path):
    """Searches that share a database replay each other's finds before generating anything."""
    mutant = REGISTRY[MUTANT[0]].mutants[MUTANT[1]]
    assert search(mutant, NUMPY, seed=10, budget=1).counterexample is None
    first = search(mutant, NUMPY, seed=0, database=tmp_path)
    replay = search(mutant, NUMPY, seed=10, budget=1, database=tmp_path)
    assert replay.examples == 1 and replay.counterexample == first.counterexample


def test_what_another_seed_stored_without_finding_does_not_change_a_search(tmp_path):
    """Only counterexamples are stored: a seed that found nothing leaves the folder empty, so a seed
    that refutes the mutant at budget 2 alone still does after it (Hypothesis's pareto front of near
    misses, replayed first, would spend that budget)."""
    mutant = REGISTRY[MUTANT[0]].mutants[MUTANT[1]]
    found = [search(mutant, NUMPY, seed=seed, budget=2).found for seed in range(24)]
    seed = next(seed for seed in range(23) if found[seed] and not found[seed + 1])
    assert not search(mutant, NUMPY, seed=seed + 1, budget=2, database=tmp_path).found
    assert not any(path.is_file() for path in tmp_path.rglob("*"))
    assert search(mutant, NUMPY, seed=seed, budget=2, database=tmp_path).found


def test_verify_on_two_workers_is_the_serial_run(capsys):
    """Claims x instances spread over a local cluster give the serial JSON, timings aside."""
    pytest.importorskip("distributed")
    argv = ("verify", "softmax-jacobian.*", "--V", "64", "--json")
    serial_code, serial, _ = run(capsys, *argv)
    code, spread, _ = run(capsys, *argv, "--workers", "2")
    assert code == serial_code == EXIT_OK
    assert without_seconds(json.loads(spread)) == without_seconds(json.loads(serial))


def test_search_on_two_workers_finds_the_mutant_and_shares_it(capsys, tmp_path):
    """One search per worker; the lowest seed that found one is reported, and the shared
    database then holds the counterexample, so another search replays it at once."""
    pytest.importorskip("distributed")
    claim_id, name = MUTANT
    code, out, _ = run(
        capsys, "search", claim_id, "--mutant", name, "--workers", "2", "--database", str(tmp_path), "--json"
    )
    result = json.loads(out)
    assert code == EXIT_VIOLATED and result["found"]
    assert [s["seed"] for s in result["searches"]] == [0, 1]
    assert result["seed"] == min(s["seed"] for s in result["searches"] if s["found"])
    assert result["counterexample"]["status"] == "violated"
    code, out, _ = run(
        capsys,
        "search",
        claim_id,
        "--mutant",
        name,
        "--seed",
        "10",
        "--budget",
        "1",
        "--json",
        "--database",
        str(tmp_path),
    )
    replay = json.loads(out)  # seed 10 alone finds nothing in one example (the test above)
    assert code == EXIT_VIOLATED and replay["examples"] == 1 and replay["counterexample"]["status"] == "violated"


def test_a_find_on_one_worker_is_replayed_by_the_other(capsys, tmp_path):
    """At budget 2, some seed s refutes the mutant and seed s + 1 alone does not; on two workers
    sharing a database, seed s + 1 then replays seed s's counterexample."""
    pytest.importorskip("distributed")
    mutant = REGISTRY[MUTANT[0]].mutants[MUTANT[1]]
    found = [search(mutant, NUMPY, seed=seed, budget=2).counterexample is not None for seed in range(24)]
    pairs = [seed for seed in range(23) if found[seed] and not found[seed + 1]]
    assert pairs, "no seed refutes the mutant at budget 2 while the next does not"
    seed = pairs[0]
    argv = ("search", MUTANT[0], "--mutant", MUTANT[1], "--seed", str(seed), "--budget", "2", "--workers", "2")
    code, out, _ = run(capsys, *argv, "--database", str(tmp_path), "--json")
    searches = {s["seed"]: s for s in json.loads(out)["searches"]}
    assert code == EXIT_VIOLATED and searches[seed]["found"]
    assert searches[seed + 1]["found"] or searches[seed + 1]["replayed"], searches


def test_search_on_a_running_cluster(capsys):
    """--scheduler joins a cluster that is already up; a true claim gives exit 0 on every seed."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        code, out, _ = run(
            capsys,
            "search",
            "softmax-jacobian.trace",
            "--budget",
            "30",
            "--json",
            "--scheduler",
            cluster.scheduler_address,
        )
    result = json.loads(out)
    assert code == EXIT_OK and not result["found"]
    assert [(s["seed"], s["found"], s["examples"]) for s in result["searches"]] == [(0, False, 30), (1, False, 30)]


def test_an_unreachable_scheduler_is_a_usage_error(capsys, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr(dist, "CONNECT_TIMEOUT", 1)
    code, _, err = run(capsys, "search", "softmax-jacobian.trace", "--scheduler", "tcp://127.0.0.1:9")
    assert code == EXIT_USAGE and "--scheduler tcp://127.0.0.1:9" in err


def test_verify_over_sizes_on_two_workers_is_the_serial_run(capsys):
    """Every (claim, instance, V) is one task; with a list of sizes the JSON is still the serial one."""
    pytest.importorskip("distributed")
    argv = ("verify", "softmax-jacobian.*", "--V", "64", "128", "--examples", "4", "--json")
    serial_code, serial, _ = run(capsys, *argv)
    code, spread, _ = run(capsys, *argv, "--workers", "2", "--worker-memory", "1GiB")
    assert code == serial_code == EXIT_OK
    records = json.loads(spread)
    assert [r["V"] for r in records] == [64] * (len(records) // 2) + [128] * (len(records) // 2)
    assert without_seconds(records) == without_seconds(json.loads(serial))


#: ``--workers 2 --worker-memory 1GiB``, and what the refusal then names.
ONE_GIB_WORKERS = (
    ("--workers", "2", "--worker-memory", "1GiB"),
    "per-worker memory limit (--worker-memory) is 1.00 GiB",
)


@pytest.mark.parametrize(("extra", "limit"), [ONE_GIB_WORKERS, ((), "available memory is 1.00 GiB")])
def test_a_size_that_cannot_fit_is_refused_before_anything_runs(capsys, monkeypatch, extra, limit):
    """The estimate of one instance at the largest V against the per-worker limit, or against the
    memory available when serial: exit 2 naming --V and the figures, and no output."""
    from rankwall.checks.cli.commands import verify as verify_command

    monkeypatch.setattr(verify_command, "available_memory_bytes", lambda: 2**30)
    monkeypatch.setattr(dist, "connect", None)  # never reached
    big = 2**24
    code, out, err = run(capsys, "verify", "softmax-jacobian.trace", "--V", "64", str(big), *extra)
    needed = runner.instance_memory_bytes(big) / 2**30
    assert code == EXIT_USAGE and out == ""
    assert f"--V {big}:" in err and f"{big:,} entries" in err and f"{needed:.2f} GiB" in err
    assert limit in err


def test_a_claim_s_own_memory_per_entry_decides_its_admission(capsys, monkeypatch):
    """A claim whose instances take more per vocabulary entry (error-rank.mini-batch: 600 contexts x V,
    measured by benchmarks/sweep.py) is refused at a size where the default estimate would pass, and
    the refusal names it; softmax-jacobian.trace at the same size is admitted."""
    from rankwall.checks.claims import error_rank
    from rankwall.checks.cli.commands import verify as verify_command

    monkeypatch.setattr(verify_command, "available_memory_bytes", lambda: 2**30)
    V = 131072
    assert (
        runner.instance_memory_bytes(V)
        < 0.8 * 2**30
        < runner.instance_memory_bytes(V, error_rank.BATCH_BYTES_PER_ENTRY)
    )
    code, out, err = run(capsys, "verify", "error-rank.mini-batch", "--V", str(V))
    assert code == EXIT_USAGE and out == ""
    assert "error-rank.mini-batch" in err and f"{error_rank.BATCH_BYTES_PER_ENTRY:,} bytes per entry" in err
    runner.admit(runner.plan([REGISTRY["softmax-jacobian.trace"]], [V], 0, 0), 2**30, "available memory")


def test_worker_memory_defaults_and_parsing(capsys):
    """8 GiB per worker, less where the machine has less; sizes in B, kB, MB, GB, KiB, MiB, GiB."""
    assert dist.default_worker_memory(2, 23 * 2**30) == 8 * 2**30
    assert dist.default_worker_memory(8, 16 * 2**30) == 2 * 2**30
    assert dist.default_worker_memory(2, None) == dist.DEFAULT_WORKER_MEMORY
    assert [dist.parse_bytes(t) for t in ("4GiB", "512MiB", "2GB", "1.5kib", "100")] == [
        4 * 2**30,
        2**29,
        2 * 10**9,
        1536,
        100,
    ]
    for bad in ("4 parsecs", "GiB", "-1GiB", "inf", ""):
        with pytest.raises(ValueError, match="4GiB"):
            dist.parse_bytes(bad)
    code, _, err = run(capsys, "verify", "softmax-jacobian.trace", "--workers", "2", "--worker-memory", "lots")
    assert code == EXIT_USAGE and "--worker-memory" in err
    code, _, err = run(capsys, "verify", "softmax-jacobian.trace", "--worker-memory", "1GiB")
    assert code == EXIT_USAGE and "--worker-memory" in err and "--workers" in err


def test_a_running_cluster_is_held_to_its_workers_memory_limit(capsys):
    """With --scheduler the limit is the smallest memory_limit among the cluster's workers."""
    distributed = pytest.importorskip("distributed")
    big = 2**24
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None, memory_limit="1GiB"
    ) as cluster:
        code, out, err = run(
            capsys, "verify", "softmax-jacobian.trace", "--V", str(big), "--scheduler", cluster.scheduler_address
        )
    assert code == EXIT_USAGE and out == ""
    assert f"--V {big}:" in err and "per-worker memory limit is 1.00 GiB" in err
