"""Beyond one machine: ``verify`` and ``search`` on a Dask cluster (``--workers N`` starts a ``dask.distributed``
LocalCluster of N worker processes, ``--scheduler ADDRESS`` joins a running one).

``verify`` maps one task per (claim, instance, V) with :meth:`distributed.Client.map` and gathers the verdicts
in submission order, so its output is the serial one (timings aside); a LocalCluster's workers are held to a
memory limit (:func:`rankwall.checks.run.runner.admit` sizes a case beforehand). ``search`` runs one seeded
search per worker (seed, seed + 1, ...) on a shared Hypothesis example database and reports the lowest seed that
found a counterexample. Dask is optional (``pip install -e '.[dask]'``); without it :func:`connect` raises
:class:`ClusterUnavailable`, which names the flag and the install command. Tasks carry claim ids, the sources of
a user's claims (``--claims``) and backend names, never claims or backends: each worker loads the sources and
rebuilds them."""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

from rankwall.checks.engine.backends import Backend, resolve
from rankwall.checks.engine.verdict import REGISTRY, Case, Claim, Verdict
from rankwall.checks.run.search import SearchResult, search
from rankwall.errors import ClusterUnavailable  # re-exported: the classes live in rankwall.errors

INSTALL = "pip install -e '.[dask]'"
#: Seconds to wait for a ``--scheduler`` to answer and to have a worker.
CONNECT_TIMEOUT = 30
#: A backend as the command line names it: (name, device, dtype).
BackendSpec = tuple[str, str | None, str]


def _distributed(flag: str) -> Any:
    try:
        import distributed
    except ImportError:
        raise ClusterUnavailable(f"{flag} needs dask.distributed, which is not installed: {INSTALL}") from None
    return distributed


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None, memory_limit: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` on a new LocalCluster of ``workers`` processes (one thread each,
    each held to ``memory_limit`` bytes when given), or on the running cluster whose scheduler
    listens at ``scheduler``; closed on exit."""
    if (workers is None) == (scheduler is None):
        raise ValueError("give exactly one of workers and scheduler")
    distributed = _distributed("--workers" if scheduler is None else "--scheduler")
    if scheduler is None:
        with (
            distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                memory_limit=0 if memory_limit is None else memory_limit,
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            yield client
        return
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT)
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as error:
        raise ClusterUnavailable(f"--scheduler {scheduler}: cannot use the cluster ({error})") from None
    with client:
        yield client


def worker_count(client: Any) -> int:
    """How many workers the client's cluster has now."""
    return len(client.nthreads())


def worker_memory_limit(client: Any) -> int | None:
    """The smallest memory limit, in bytes, among the cluster's workers; ``None`` where none has one."""
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info().get("workers", {}).values()]
    return min((limit for limit in limits if limit > 0), default=None)


# --------------------------------------------------------------------------- memory of a worker

#: Each ``--workers`` process gets at most this much memory by default (less where the machine
#: has less available: its available memory shared among the workers). 2 workers on this 23 GiB
#: machine get 8 GiB each, enough for V = 2^22 (an estimated 5.1 GiB).
DEFAULT_WORKER_MEMORY = 8 * 2**30


def default_worker_memory(workers: int, available: int | None) -> int:
    """The per-worker limit of ``--workers N`` without ``--worker-memory``."""
    return DEFAULT_WORKER_MEMORY if available is None else min(DEFAULT_WORKER_MEMORY, available // workers)


#: Units of ``--worker-memory``.
UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_bytes(text: str) -> int:
    """``4GiB``, ``512MiB``, ``2GB`` or a plain count, as bytes; ValueError for anything else."""
    stripped = text.strip()
    number = stripped.rstrip("BbKkMmGgIi")
    unit = stripped[len(number) :].upper()
    try:
        value = float(number) * UNITS[unit]
    except (KeyError, ValueError):
        value = 0.0
    if not 0 < value < 2**50:
        raise ValueError(f"expected a positive size such as 4GiB or 512MiB, got {text!r}")
    return int(value)


@functools.cache
def _backend(spec: BackendSpec) -> Backend:
    return resolve(*spec)


def _claim(claim_id: str, sources: Sequence[str] = ()) -> Claim:
    """The claim (or mutant ``id[name]``) in this process, after loading the claims a user declared
    (``--claims`` sources, and the installed packages' entry points) in a fresh worker."""
    from rankwall.checks.run.loader import load_all

    load_all(tuple(sources))
    return REGISTRY[claim_id]


def _check(
    claim_id: str, instance: Case, spec: BackendSpec, sources: tuple[str, ...], exact: bool | None
) -> tuple[Verdict | None, float]:
    """One task of ``verify``: the verdict on one case (``None`` outside its domain) and its seconds."""
    from rankwall.checks.run.runner import check_in_domain

    started = time.perf_counter()
    verdict = check_in_domain(_claim(claim_id, sources), instance, _backend(spec), exact)
    return verdict, time.perf_counter() - started


def check_all(
    client: Any,
    jobs: Sequence[tuple[str, Case, BackendSpec]],
    on_done: Callable[[], None] | None = None,
    sources: Sequence[str] = (),
    exact: bool | None = None,
) -> list[tuple[Verdict | None, float]]:
    """The verdict and seconds of each (claim id, case, backend) job, in the order of ``jobs``; every
    worker first loads the claims of ``sources``."""
    if not jobs:
        return []
    distributed = _distributed("--workers")
    ids, cases, specs = zip(*jobs, strict=True)
    futures = client.map(_check, ids, cases, specs, [tuple(sources)] * len(jobs), [exact] * len(jobs), pure=False)
    for _ in distributed.as_completed(futures):
        if on_done is not None:
            on_done()
    return client.gather(futures)


def _search(
    seed: int,
    claim_id: str,
    spec: BackendSpec,
    tighten: Fraction,
    budget: int,
    database: str,
    sources: tuple[str, ...],
    exact: bool | None = None,
) -> SearchResult:
    """One task of ``search``: a whole seeded search on the shared database."""
    from hypothesis.errors import HypothesisDeprecationWarning

    with warnings.catch_warnings():
        # The worker's own threads draw from the global ``random`` while a strategy runs, which
        # Hypothesis takes for the strategy's doing; the search's randomness is its seed alone.
        warnings.filterwarnings("ignore", "Do not use the `random` module", HypothesisDeprecationWarning)
        return search(
            _claim(claim_id, sources),
            _backend(spec),
            tighten=tighten,
            budget=budget,
            seed=seed,
            database=database,
            exact=exact,
        )


def search_all(
    client: Any,
    claim_id: str,
    spec: BackendSpec,
    *,
    tighten: Fraction,
    budget: int,
    seeds: Sequence[int],
    database: str,
    on_done: Callable[[], None] | None = None,
    sources: Sequence[str] = (),
    exact: bool | None = None,
) -> list[SearchResult]:
    """One search of ``claim_id`` (a mutant as ``id[name]``) per seed, spread over the cluster's
    workers, sharing the ``database`` folder (which every worker must be able to read and write); the
    results in the order of ``seeds``. Every worker first loads the claims of ``sources``."""
    distributed = _distributed("--workers")
    futures = client.map(
        _search,
        list(seeds),
        claim_id=claim_id,
        sources=tuple(sources),
        exact=exact,
        spec=spec,
        tighten=tighten,
        budget=budget,
        database=database,
        pure=False,
    )
    for _ in distributed.as_completed(futures):
        if on_done is not None:
            on_done()
    return client.gather(futures)


def first_found(results: Sequence[SearchResult]) -> SearchResult:
    """The result to report: the lowest seed that found a counterexample, else the lowest seed."""
    found = [r for r in results if r.counterexample is not None]
    return min(found or results, key=lambda r: r.seed)
