"""``rankwall verify`` as a library: each claim checked on its witnesses and random instances at each
vocabulary size, with typed results (:class:`ClaimReport`, :class:`VerifyReport`) that the command
line only prints.

A plan (:func:`plan`) lists, for each size and claim, the cases to check; :func:`admit` refuses,
before anything runs, a size whose largest case cannot fit the memory it may take; :func:`verify`
checks every case, in this process or through a ``remote`` runner (the Dask cluster of
:mod:`rankwall.checks.run.distributed`), and keeps for each claim its worst verdict, the counts by status
and by certification, the cases outside their domain, and the time.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rankwall.checks.engine.verdict import SEVERITY, Case, Claim, OutsideDomain, Status, Verdict, worst
from rankwall.errors import TooLarge  # re-exported: the classes live in rankwall.errors

#: Resident memory of a process that has imported the claims and checked the softmax-jacobian
#: claims at V = 64 (``ru_maxrss``: 107 MiB on this machine); a worker process is about as large.
PROCESS_BASE_BYTES = 128 * 2**20
#: Peak bytes per vocabulary entry of one instance beyond :data:`PROCESS_BASE_BYTES`, measured on
#: the softmax-jacobian family on this machine (``ru_maxrss``, what ``peak_memory_mb`` reads), each
#: claim in its own serial process (``python benchmarks/sweep.py 'softmax-jacobian.*' --V 4194304
#: --serial --each --json``): at V = 2^22 at most 316 (psd, peak 1,394 MiB; the others 59-100), and
#: 320 for psd at V = 2^20 (peak 448 MiB, ``... 'softmax-jacobian.psd' --V 1048576 --serial``), so
#: flat in V; rounded up by a quarter. The worst instance is ``psd``'s re-decision on the exact row
#: (integers over one power of two in NumPy object arrays, ``checks/exact/vectors.py``), not the
#: float route (a few float64 rows, 8 bytes per entry each; the compiled secular solver reads the
#: row in place).
BYTES_PER_ENTRY = 400
#: The share of a limit one instance may take: Dask pauses a worker at 80% of its limit, and a
#: serial run leaves the rest of the available memory to the estimate's error and other processes.
MEMORY_SHARE = 0.8


def instance_memory_bytes(vocabulary: int, bytes_per_entry: int | None = None) -> int:
    """The estimated peak resident memory of a process checking one instance of ``vocabulary`` entries,
    at ``bytes_per_entry`` (a claim's own, measured; :data:`BYTES_PER_ENTRY` by default)."""
    return PROCESS_BASE_BYTES + (bytes_per_entry or BYTES_PER_ENTRY) * vocabulary


@dataclass(frozen=True)
class Planned:
    """The cases of one claim at one requested size."""

    V: int
    claim: Claim
    cases: list[Case]

    @property
    def largest_V(self) -> int | None:
        return largest_vocabulary(self.cases)


def largest_vocabulary(cases: Iterable[Case]) -> int | None:
    return max((c.vocabulary for c in cases if c.vocabulary is not None), default=None)


def plan(claims: Sequence[Claim], sizes: Sequence[int] | None, examples: int, seed: int) -> list[Planned]:
    """For each size (in the order given, each once) and claim: its witnesses and ``examples`` random
    cases. Without sizes, each claim at its own :attr:`Claim.default_V`."""
    pairs = (
        [(claim.default_V, claim) for claim in claims]
        if sizes is None
        else [(V, claim) for V in dict.fromkeys(sizes) for claim in claims]
    )
    return [Planned(V, claim, claim.witnesses(V) + claim.random_instances(V, examples, seed)) for V, claim in pairs]


def admit(planned: Sequence[Planned], limit: int | None, what: str) -> None:
    """Refuse (:class:`TooLarge`) a size whose largest case needs more than :data:`MEMORY_SHARE` of
    ``limit`` bytes (:func:`instance_memory_bytes`); no limit known, no check."""
    if limit is None:
        return
    for V in dict.fromkeys(p.V for p in planned):
        at_V = [p for p in planned if p.V == V]
        worst = max(at_V, key=lambda p: instance_memory_bytes(p.largest_V or 0, p.claim.bytes_per_entry))
        largest, per_entry = worst.largest_V or 0, worst.claim.bytes_per_entry or BYTES_PER_ENTRY
        needed = instance_memory_bytes(largest, per_entry)
        if needed > MEMORY_SHARE * limit:
            raise TooLarge(
                f"--V {V}: one instance of {worst.claim.id} ({largest:,} entries) needs about "
                f"{needed / 2**30:.2f} GiB ({PROCESS_BASE_BYTES / 2**20:.0f} MiB + {per_entry:,} bytes per entry), "
                f"but the {what} is {limit / 2**30:.2f} GiB, of which one instance may take {MEMORY_SHARE:.0%}"
            )


def check_in_domain(claim: Claim, case: Case, backend: Any, exact: bool | None = None) -> Verdict | None:
    """The claim's verdict on the case, or ``None`` for a case whose built values leave its domain."""
    try:
        return claim.check(case, backend, exact=exact)
    except OutsideDomain:
        return None


@dataclass(frozen=True)
class ClaimReport:
    """One claim at one size: its worst verdict (``None``: no case in its domain at this size), the
    counts by status and by certification, how many cases fell outside their domain, the largest
    vocabulary checked, the seconds spent, and the backend that ran (NumPy float64 for a claim that
    does not follow the requested one)."""

    V: int
    claim: Claim
    verdict: Verdict | None
    counts: Counter[str]
    certified_by: Counter[str]
    outside_domain: int
    largest_V: int | None
    seconds: float
    backend: Any

    @property
    def checked(self) -> int:
        return sum(self.counts.values())

    def to_json(self) -> dict[str, Any]:
        head = (
            self.verdict.to_json()
            if self.verdict is not None
            else {"claim": self.claim.id, "status": "unchecked", "reason": f"no instance at V = {self.V}"}
        )
        return {
            **head,
            "instances_checked": self.checked,
            "counts": dict(self.counts),
            "certifications": dict(self.certified_by),
            "outside_domain": self.outside_domain,
            "seconds": round(self.seconds, 3),
            "V": self.V,
            "largest_V": self.largest_V,
            "array_api": self.claim.array_api,
            **self.backend.describe(),
        }


@dataclass(frozen=True)
class VerifyReport:
    """Every claim's report, and the wall-clock seconds of the whole run."""

    reports: list[ClaimReport]
    seconds: float

    @property
    def worst_status(self) -> Status:
        """The most severe verdict over all claims and sizes (holds when nothing was checked)."""
        checked = [r.verdict.status for r in self.reports if r.verdict is not None]
        return max(checked, key=SEVERITY.__getitem__, default=Status.HOLDS)

    def tally(self) -> dict[str, int]:
        """Claims (per size) by the status of their worst verdict, with ``unchecked`` for none."""
        tally = Counter(r.verdict.status.value if r.verdict is not None else "unchecked" for r in self.reports)
        return {key: tally.get(key, 0) for key in ("holds", "violated", "inconclusive", "unchecked")}

    def summary(self) -> str:
        """One line for people: the claims by status, the cases checked, and the time."""
        tally = self.tally()
        cases = sum(r.checked for r in self.reports)
        outside = sum(r.outside_domain for r in self.reports)
        parts = [f"{n} {'hold' if key == 'holds' else key}" for key, n in tally.items()]
        extra = f" ({outside} outside their domain)" if outside else ""
        return f"{len(self.reports)} claims: {', '.join(parts)}; {cases} instances{extra} in {self.seconds:.1f} s"


#: A runner of (claim, case, backend) jobs elsewhere, told of each job as it completes: the verdict of
#: each (``None`` outside its domain) and its seconds, in the order of the jobs.
Remote = Callable[[list[tuple[Claim, Case, Any]], Callable[[], None]], list[tuple[Verdict | None, float]]]


def verify(
    planned: Sequence[Planned],
    backend: Any,
    numpy_backend: Any,
    *,
    on_case: Callable[[Planned | None], None] = lambda planned: None,
    remote: Remote | None = None,
    exact: bool | None = None,
) -> VerifyReport:
    """Check every planned case: in ``backend`` for a claim that follows the array API, else in
    ``numpy_backend``; here, or through ``remote`` (one job per case, results in plan order).
    ``on_case`` is told of each case as it is done (with its plan entry, or ``None`` from ``remote``);
    ``exact`` as in :meth:`Claim.check` (``True``: every identity re-decided exactly)."""
    started = time.perf_counter()
    chosen = [backend if p.claim.array_api else numpy_backend for p in planned]
    done: Iterator[tuple[Verdict | None, float]] | None = None
    if remote is not None:
        jobs = [(p.claim, case, b) for p, b in zip(planned, chosen, strict=True) for case in p.cases]
        done = iter(remote(jobs, lambda: on_case(None)))
    reports = []
    for p, used in zip(planned, chosen, strict=True):
        results: list[tuple[Verdict | None, float]] = []
        for case in p.cases:
            if done is not None:
                results.append(next(done))
                continue
            began = time.perf_counter()
            results.append((check_in_domain(p.claim, case, used, exact), time.perf_counter() - began))
            on_case(p)
        verdicts = [v for v, _ in results if v is not None]
        reports.append(
            ClaimReport(
                V=p.V,
                claim=p.claim,
                verdict=worst(verdicts) if verdicts else None,
                counts=Counter(v.status.value for v in verdicts),
                certified_by=Counter(v.certified_by.value for v in verdicts if v.certified_by is not None),
                outside_domain=sum(v is None for v, _ in results),
                largest_V=p.largest_V,
                seconds=sum(s for _, s in results),
                backend=used,
            )
        )
    return VerifyReport(reports, time.perf_counter() - started)
