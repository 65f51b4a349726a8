"""The fidelity table and the statement index of the proof companion.

``ROWS``: each quantitative claim of the three seeds, what rankwall makes of it, and the figure
rankwall prints beside the seed's. A row's figure is never typed by hand. It is one or more
:class:`Figure` objects, each read from the project's own evidence when the table is built: a
recorded JSON under ``docs/_static`` (:class:`Recorded`, through key paths the tests resolve),
claims of the registry checked on their witnesses (:class:`Checked`), or a small computation with
the project's theory code (:class:`Computed`).

``STATEMENTS``: every theorem and lemma of the docs, with its stable number, where the seeds state
it, whether it is the seed's statement, reconstructed, corrected or new, its claims and its tests.

``docs/_ext/companion.py`` renders both as tables and numbers the theorems from ``STATEMENTS``;
``tests/test_fidelity.py`` checks every pointer, label, claim and test they name.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

from rankwall.checks import models
from rankwall.checks.claims import FAMILY_MODULES
from rankwall.checks.engine.statements import Statement

#: Where the checked claims run: a small vocabulary, so the whole table renders in seconds.
CHECK_V = 64


class Status(StrEnum):
    """What rankwall makes of a seed's claim."""

    REPRODUCED = "reproduced"
    QUALIFIED = "qualified"
    REFUTED = "refuted"
    IN_MINIATURE = "in miniature"
    OUT_OF_REACH = "out of reach"


Key = str | int


@dataclass(frozen=True)
class Pointer:
    """A key path into a recorded JSON, relative to ``docs/_static``."""

    file: str
    keys: tuple[Key, ...] = ()

    def read(self, docs: Path) -> Any:
        """The value at the key path (``KeyError``/``IndexError`` when it does not resolve)."""
        value = _load(docs / "_static" / self.file)
        for key in self.keys:
            value = value[key]
        return value


@cache
def _load(path: Path) -> Any:
    return json.loads(path.read_text())


@dataclass(frozen=True)
class Recorded:
    """Values from recorded runs, put into words by ``words`` (one argument per pointer)."""

    pointers: tuple[Pointer, ...]
    words: Callable[..., str]

    def text(self, docs: Path) -> str:
        return self.words(*(p.read(docs) for p in self.pointers))


@dataclass(frozen=True)
class Checked:
    """Claims of the registry, each checked on its witnesses at vocabulary size ``V``. An id
    ``claim[mutant]`` names a planted false variant, which must be refuted: its figure counts the
    witnesses on which it is violated."""

    claims: tuple[str, ...]
    V: int = CHECK_V

    def text(self, docs: Path) -> str:
        return "; ".join(_checked(claim_id, self.V) for claim_id in self.claims)


@cache
def _checked(claim_id: str, V: int) -> str:
    from rankwall.checks.engine.backends import resolve
    from rankwall.checks.engine.verdict import REGISTRY

    base, _, mutant = claim_id.partition("[")
    claim = REGISTRY[base].mutants[mutant.rstrip("]")] if mutant else REGISTRY[claim_id]
    verdicts = [claim.check(instance, resolve("numpy")) for instance in claim.witnesses(V)]
    counts = Counter(v.status.value for v in verdicts)
    expected = "violated" if mutant else "holds"
    others = ", ".join(f"{status} on {n}" for status, n in sorted(counts.items()) if status != expected)
    said = "the mutant " + claim_id + " is violated" if mutant else claim_id + " holds"
    return f"{said} on {counts[expected]} of {len(verdicts)} witnesses" + (f" ({others})" if others else "")


@dataclass(frozen=True)
class Computed:
    """A figure computed here by the project's theory code."""

    compute: Callable[[], str]

    def text(self, docs: Path) -> str:
        return self.compute()


Figure = Recorded | Checked | Computed


@dataclass(frozen=True)
class Row:
    """One quantitative claim of a seed and what rankwall makes of it."""

    seed: str
    where: str
    seed_says: str
    status: Status
    page: str
    command: str
    figures: tuple[Figure, ...]
    reason: str = ""
    theorem: str = ""  # the label of the statement the row rests on, if any

    def figure(self, docs: Path) -> str:
        """rankwall's figure, read from the evidence now (a dash where there is none)."""
        return "; ".join(f.text(docs) for f in self.figures) or "none"

    @property
    def claim_ids(self) -> tuple[str, ...]:
        """The registry claims the row checks (a mutant counts as its claim)."""
        named = (c.partition("[")[0] for f in self.figures if isinstance(f, Checked) for c in f.claims)
        return tuple(dict.fromkeys(named))

    @property
    def pointers(self) -> tuple[Pointer, ...]:
        return tuple(p for f in self.figures if isinstance(f, Recorded) for p in f.pointers)


# --------------------------------------------------------------------------- small computations

SPOT = "spot/spot.json"
EXPERIMENTS = "experiments/"
ATTENTION = EXPERIMENTS + "attention_heads.json"
SIGNS = EXPERIMENTS + "sign_agreement.json"
LOWRANK = EXPERIMENTS + "lowrank_heads.json"
ANATOMY = EXPERIMENTS + "efficiency_anatomy.json"
GRADIENT_TAIL = EXPERIMENTS + "gradient_tail.json"
TRAJECTORY = EXPERIMENTS + "attention_trajectory.json"
GENERATIONS = EXPERIMENTS + "spamlang_generations.json"
DEPTH = EXPERIMENTS + "efficiency_depth.json"
MOS_LM = EXPERIMENTS + "mos_lm.json"
RATES = EXPERIMENTS + "spamlang_rates.json"
TRAINED, RANDOM = "model head", "random Gaussian head"


def _depth_collapse(collapse: list[dict]) -> str:
    """The efficiency-depth run: the D = 128 pair's largest |log ratio| against the control's, per checkpoint."""
    parts = [
        f"step {c['step']}: {c['within_pair']:.3f} within the pair, {c['to_control']:.3f} to D = 64" for c in collapse
    ]
    return "largest |log ratio| of the update-efficiency curves: " + "; ".join(parts)


def _width_does_not_enter() -> str:
    import numpy as np

    from rankwall.theory import softmax_jacobian as sj

    wide, narrow = np.r_[0.99, np.full(63, 0.01 / 63)], np.array([0.99, 0.01])
    norms = [float(sj.spectral_norm(p)) for p in (wide, narrow)]
    bounds = {f"{float(sj.lower_bound(p)):.6f} .. {float(sj.upper_bound(p)):.6f}" for p in (wide, narrow)}
    return (
        f"m = 0.99: ||J|| = {norms[0]:.6f} (64 positions), {norms[1]:.6f} (2 positions); "
        f"bounds {' / '.join(sorted(bounds))} for both"
    )


def _bounds_ratio() -> str:
    import numpy as np

    from rankwall.theory import softmax_jacobian as sj

    ms = np.linspace(0.01, 0.99, 99)
    rows = np.stack([np.r_[m, 1 - m] for m in ms])
    ratio = sj.upper_bound(rows) / sj.lower_bound(rows)
    return (
        f"2m(1-m) / m(1-m) over m = 0.01..0.99: from {ratio.min():.12f} to {ratio.max():.12f}; "
        f"(1+m)/m at m = 0.99 is {(1 + 0.99) / 0.99:.4f}"
    )


def _slowdown() -> str:
    from rankwall.theory import softmax_jacobian as sj

    return f"m = 0.98: {sj.slowdown(0.98):.1f}x; m = 0.9999: {sj.slowdown(0.9999):.0f}x"


def _rank_v_minus_one() -> str:
    from fractions import Fraction

    from rankwall.checks.claims.error_rank import UniqueContinuation
    from rankwall.checks.engine.backends import resolve
    from rankwall.checks.engine.verdict import REGISTRY

    unique = REGISTRY["error-rank.unique-continuation"]
    instance = UniqueContinuation(V=64, k=64, D=8, seed=0, scale=1.0)
    v = unique.check(instance, resolve("numpy"), Fraction("1.0001"))
    return (
        f"V = 64 with 64 unique continuations: rank in [{v.certificate['rank_lower']}, "
        f"{v.certificate['rank_upper']}]; 'rank >= 64' {v.status.value}"
    )


def _batch_rank_grows() -> str:
    """Fig. 7(a) in miniature: the certified rank of the mini-batch gradient of a smoothed 4-gram model
    of tinyshakespeare's characters, against the batch size (``rankwall experiment batch-rank``)."""
    from rankwall.checks.experiments import batch_rank
    from rankwall.theory import error_rank as er

    name, (counts, V) = next((n, lang) for n, lang in batch_rank.languages(0).items() if n.startswith("chars"))
    shares = []
    for b in (64, 1024, 8192):
        _, rank = batch_rank.gradient_spectrum(counts, er.sample_batch(counts, b, b), 1e-3)
        shares.append(f"b = {b:,}: {rank / (V - 1):.3f}")
    return f"{name}, certified rank / (V - 1): " + ", ".join(shares)


def _unique_continuations() -> str:
    """|C^uu| against V on tinyshakespeare: contexts of the whole text with one observed next token
    (character 4-grams, word trigrams), and contexts of a batch with one batch token but several in the text."""
    from rankwall.checks.companion.data import characters, read_corpus, words
    from rankwall.theory import error_rank as er

    text = read_corpus("tinyshakespeare.txt")
    parts = []
    for name, stream, order in (("characters", characters(text), 3), ("words", words(text), 2)):
        counts, _ = er.ngram_counts(stream.ids, order, stream.V)
        _, unique = er.unique_continuations(counts)
        batch = er.sample_batch(counts, 8192, 0)
        _, in_batch = er.batch_unique_continuations(counts, batch)
        parts.append(
            f"{name}: k = {len(unique):,} of V = {stream.V:,} in the text, k_B = {len(in_batch):,} "
            "in a batch of 8,192 tokens"
        )
    return "; ".join(parts)


def _loss_to_zero() -> str:
    """§3.2: the circle witness at top-1 probability 1 - 1e-6 has cross-entropy 1e-6 nats at V = 131,072."""
    import numpy as np

    from rankwall.theory import expressivity as ex

    V = 131072
    targets = np.random.default_rng(0).integers(0, V, 8)
    H, W = ex.construct_top1_witness(targets, np.full(8, 1 - 1e-6), D=2, eps=1e-9, V=V)
    argmax, top, _ = ex.top1(H, W)
    return (
        f"circle witness, D = 2, V = {V:,}: argmax right on {int((argmax == targets).sum())} of 8 contexts, "
        f"cross-entropy at most {float(-np.log(top).max()):.1e} nats"
    )


def _absolute_threshold() -> str:
    """A.3.1's rank rule (|R_ii| > 1e-6 in a QR) is absolute: the same gradient scaled by 1/T counts a
    different rank, while a Weyl-margin certificate, relative to sigma_1, does not move."""
    import numpy as np

    from rankwall.checks.engine import tolerance
    from rankwall.theory import compression as cp

    W = cp.construct_head(2048, 64, 0)
    H, t = cp.construct_batch(256, 64, 2048, 1)
    G = np.vstack(list(cp.logit_gradient_blocks(H, W, t)))
    counts = []
    for scale in (1.0, 256 / 500_000):
        R = np.linalg.qr((scale * G).T, mode="r")
        s = np.linalg.svd(scale * G, compute_uv=False)
        certified = int(np.sum(s > tolerance.svd_rank_margin(G.shape, 2.0**-53, 0.0, s[0])))
        counts.append((int(np.sum(np.abs(np.diag(R)) > 1e-6)), certified))
    (a, b), (c, d) = counts
    return (
        f"a 256-token logit gradient (V = 2,048): |R_ii| > 1e-6 counts {a} as the batch mean, {c} rescaled "
        f"to a 500,000-token mean; the Weyl certificate gives {b} and {d}"
    )


def _envelope_below_half() -> str:
    """Seed 002's diffuse head: at m = 0.046 the envelope is m, not 2m(1 - m)."""
    import numpy as np

    from rankwall.theory import softmax_jacobian as sj

    m = 0.046
    atoms = int(1 // m)
    row = np.r_[np.full(atoms, m), 1 - atoms * m]
    return (
        f"m = {m}: 2m(1 - m) = {float(sj.upper_bound(row)):.4f}, the envelope min(m, 2m(1 - m)) = "
        f"{min(m, 2 * m * (1 - m)):.4f}, attained: ||J|| = {float(sj.spectral_norm(row)):.4f} "
        f"for {atoms} tied atoms"
    )


def _trace_in_float32() -> str:
    """The trace identity on float32 rows: it holds to float32 rounding."""
    import numpy as np

    from rankwall.theory import softmax_jacobian as sj

    rows = np.random.default_rng(0).dirichlet(np.ones(64), 1000).astype(np.float32)
    gap = float(np.abs(np.asarray(sj.trace(rows)) - np.asarray(sj.collision_complement(rows))).max())
    return f"1,000 float32 rows of 64: largest |tr J - (1 - Σp²)| = {gap:.1e}, float32 u = {2.0**-24:.1e}"


def _replace_versus_remove() -> str:
    """Seed 002's "about 841 times less": the ratio of its printed ablation costs, and the shift cost that
    841 needs."""
    remove, shift = 1.1252, 0.0013
    return (
        f"1.1252 / 0.0013 = {remove / shift:.0f}; 841 needs a shift cost of 1.1252 / 841 = {remove / 841:.6f}, "
        f"which rounds to the printed 0.0013 (anything in [0.00125, 0.00135) gives {remove / 0.00135:.0f} "
        f"to {remove / 0.00125:.0f})"
    )


def _weighted_cross_entropy_gradient() -> str:
    """Seed 000, §2.2: diag(f)(P - Ñ) is the gradient of the frequency-weighted cross-entropy
    sum_c f_c CE(Ñ_c, softmax(z_c)), by autograd in float64 on logits with idle contexts (f_c = 0)."""
    import numpy as np
    import torch

    from rankwall.theory import updates as up

    P, counts, f = up.construct_logit_gradient(12, 8, seed=0, idle=3)
    logits = torch.tensor(np.log(P), dtype=torch.float64, requires_grad=True)
    N = torch.tensor(counts / counts.sum(axis=1, keepdims=True), dtype=torch.float64)
    weights = torch.tensor(f, dtype=torch.float64)
    loss = -(weights[:, None] * N * torch.log_softmax(logits, dim=1)).sum()
    loss.backward()
    formula = up.logit_gradient(torch.softmax(logits, dim=1).detach().numpy(), counts, f)
    gap = float(np.abs(logits.grad.numpy() - formula).max())
    return (
        f"autograd of sum_c f_c CE(Ñ_c, softmax(z_c)), float64, 12 contexts (3 with f_c = 0), V = 8: "
        f"largest |gradient - diag(f)(P - Ñ)| = {gap:.1e} (u = {2.0**-53:.1e}, f up to {f.max()})"
    )


def _sightings_at_largest_V() -> str:
    """Seed 000, §3.2: 41M tokens over V = 131,072 distinct tokens."""
    return (
        f"41M tokens / 131,072 = {41e6 / 131072:,.0f} sightings per token at the largest V; "
        f"{41e6 / 1024:,.0f} at V = 1,024"
    )


def _regularization_control() -> str:
    """Seed 001's arithmetic on the 1B Word perplexities it prints (41.47/42.77 softmax, 36.39/37.10 MoS)."""
    soft_train, soft_test, mos_train, mos_test = 41.47, 42.77, 36.39, 37.10
    return (
        f"train gap {soft_train - mos_train:.2f}; generalization gaps {mos_test - mos_train:.2f} (MoS) and "
        f"{soft_test - soft_train:.2f} (softmax); ratios {mos_test / mos_train:.3f} and "
        f"{soft_test / soft_train:.3f}"
    )


def _ablation_controls() -> str:
    """Seed 001's ablation perplexities as printed (lower is better)."""
    return (
        f"as printed: MoC worse than its AWD-LSTM baseline on WikiText-2 by {65.98 - 65.40:.2f}; the baseline "
        f"with MoS's hyperparameters worse than with its own on PTB by {74.86 - 58.95:.2f}"
    )


def _scaled_attention_at_initialisation() -> str:
    """Seed 002: the 1/sqrt(d) scale at initialisation, for unit Gaussian queries and keys (d = 64, 64 keys):
    median top weight m of the attention rows with and without it."""
    import numpy as np

    rng = np.random.default_rng(0)
    d, keys, rows = 64, 64, 2000
    q, k = rng.standard_normal((rows, d)), rng.standard_normal((rows, keys, d))
    scores = np.einsum("rd,rkd->rk", q, k)
    parts = []
    for name, z in (("with 1/sqrt(d)", scores / np.sqrt(d)), ("without", scores)):
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        m = p.max(axis=1)
        parts.append(f"{name}: median m {np.median(m):.2f}, {np.mean(m > 0.5):.0%} of rows past 1/2")
    return f"unit Gaussian queries and keys, d = {d}, {keys} keys: " + "; ".join(parts)


def _previous_token_head(heads: list[dict]) -> str:
    """SmolLM2's most previous-token attention head (the nearest evidence for seed 002's head (0,1))."""
    h = max(heads, key=lambda h: h["previous_token_share"])
    return (
        f"SmolLM2's most previous-token head, layer {h['layer']} head {h['head']}: previous token on "
        f"{h['previous_token_share']:.1%} of rows, {h['share_m_above_0.9']:.1%} of rows past 0.9, "
        f"median m {h['median_m']:.2f}"
    )


def _efficiency_against_subspace(heads: list[dict]) -> str:
    """Fig. 6 in miniature against the random-subspace identity: the loss-decrease ratio of random Gaussian
    heads beside sqrt(V/D)."""
    return "random Gaussian heads: " + ", ".join(
        f"D = {h['D']}: {h['total']:.1f}x (sqrt(V/D) = {(h['V'] / h['D']) ** 0.5:.1f})"
        for h in heads
        if h["kind"] == "random Gaussian"
    )


def _gradient_tail(heads: dict, D: int) -> str:
    """Prop. A.6 past 2D tokens on SmolLM2 (``rankwall experiment gradient-tail``)."""
    model, rand = heads["model head"][-1], heads["random Gaussian head"][-1]
    return (
        f"SmolLM2, n = {model['tokens']:,} > 2D = {2 * D:,}: certified rank >= {model['certified_rank']:,}, "
        f"tail beyond 2D >= {model['tail_beyond_2D_lower']:.2%} of ||G||_F (random head "
        f"{rand['tail_beyond_2D_lower']:.2%}); at n <= 2D it is 0"
    )


def _seed002_arithmetic() -> str:
    """The seed's ratios from its own printed values (0.0050, 0.0293, 0.0519; 1.1252 of 4.174 - 1.573 nats)."""
    return (
        f"0.0293/0.0050 = {0.0293 / 0.0050:.2f}, 0.0519/0.0050 = {0.0519 / 0.0050:.2f}, "
        f"1.1252/(4.174 - 1.573) = {1.1252 / (4.174 - 1.573):.1%}"
    )


def _fraction_by_confidence(heads: list[dict]) -> str:
    """Seed 002's 'fraction roughly constant across confidence levels', on SmolLM2's heads: median of
    gain / 2m(1 - m) per head, in three bands of median m."""
    import statistics

    bands = ((0.0, 0.3), (0.3, 0.7), (0.7, 0.99))
    parts = []
    for lo, hi in bands:
        ratios = [
            h["median_gain"] / (2 * h["median_m"] * (1 - h["median_m"])) for h in heads if lo <= h["median_m"] < hi
        ]
        parts.append(f"m in [{lo}, {hi}): {statistics.median(ratios):.4f} ({len(ratios)} heads)")
    return "SmolLM2, median gain / 2m(1 - m) per head: " + ", ".join(parts)


# --------------------------------------------------------------------------- words for recorded runs


def _range(r: Sequence[float]) -> str:
    return f"{r[0]:.2f}-{r[1]:.2f}"


def _rank_cells(records: list[dict], heads: tuple[str, ...], K_from: int = 1) -> str:
    """Certified rank intervals per D, the lower ends as a range where they differ across K."""
    cells = []
    for D in sorted({r["D"] for r in records}):
        rs = [r for r in records if r["head"] in heads and r["K"] >= K_from and r["D"] == D]
        los, his = sorted({r["rank_lower"] for r in rs}), sorted({r["rank_upper"] for r in rs})
        lo = str(los[0]) if len(los) == 1 else f"{los[0]} to {los[-1]}"
        hi = str(his[0]) if len(his) == 1 else f"{his[0]} to {his[-1]}"
        cells.append(f"D = {D}: [{lo}, {hi}]")
    return ", ".join(cells)


def _below(records: list[dict], head: str, D: int, K_from: int = 1) -> str:
    """Share of normalized singular values below 1e-9 (of min(N, V))."""
    shares = sorted(
        {
            1 - r["numerical_rank"]["1e-09"] / len(r["spectrum"])
            for r in records
            if r["head"] == head and r["D"] == D and r["K"] >= K_from
        }
    )
    return " to ".join(f"{s:.1%}" for s in (shares[0], shares[-1])) if len(shares) > 1 else f"{shares[0]:.1%}"


def _smallest(records: list[dict], head: str, D: int, K_from: int = 1) -> float:
    """The smallest normalized singular value over the matching records."""
    return min(min(r["spectrum"]) for r in records if r["head"] == head and r["D"] == D and r["K"] >= K_from)


def _spam(runs: list[dict], tied: bool) -> dict[int, float]:
    return {
        r["V"]: r["final_loss"] / r["initial_loss_log_V"] for r in runs if r["role"] == "sweep" and r["tied"] == tied
    }


def _rates(by_V: list[dict], criterion: str, steps: int) -> str:
    """Fig. 3(b) in miniature: per V, the learning rates of the grid whose run converged."""
    parts = [
        f"V = {row['V']:,}: "
        + (
            f"{row['lowest_converging_rate']:g} to {row['highest_converging_rate']:g} "
            f"({len(row['converging_rates'])} of {row['rates_tried']} rates)"
            if row["converging_rates"]
            else f"none of {row['rates_tried']} (best final loss {row['best_final_loss']:.2f}, at {row['best_rate']:g})"
        )
        for row in by_V
    ]
    return f"rates that converge ({criterion}, {steps} steps): " + "; ".join(parts)


def _tying(runs: list[dict]) -> str:
    tied, untied = _spam(runs, True), _spam(runs, False)
    lower = [V for V in tied if tied[V] < untied[V]]
    return f"tied ends lower at {len(lower)} of {len(tied)} vocabulary sizes (V = {', '.join(map(str, lower))})"


def _ordered(runs: list[dict]) -> str:
    curves = [r["valid_loss"] for r in runs]
    ordered = sum(all(a[i] > b[i] for a, b in pairwise(curves)) for i in range(len(curves[0])))
    return (
        f"validation loss strictly ordered by D at {ordered} of {len(curves[0])} evaluations (D = "
        + ", ".join(str(r["D"]) for r in runs)
        + ")"
    )


def _saturated_head(heads: list[dict]) -> str:
    low, nxt = sorted(heads, key=lambda h: h["median_gain"])[:2]
    return (
        f"SmolLM2 layer {low['layer']} head {low['head']}: median m {low['median_m']:.6f}, median gain "
        f"{low['median_gain']:.1e}, {nxt['median_gain'] / low['median_gain']:.0f}x less than the next-lowest head"
    )


def _essential(head: dict) -> str:
    iv = head["interventions"]
    return (
        f"SmolLM2 layer {head['layer']} head {head['head']} (median m {head['median_m']:.2f}, previous token on "
        f"{head['previous_token_share']:.0%}): zeroed {iv['zero']['loss_change']:+.3f} "
        f"± {iv['zero']['standard_error']:.3f} nats, shift-by-one {iv['shift']['loss_change']:+.3f} "
        f"± {iv['shift']['standard_error']:.3f}"
    )


def _commitment(c: dict, steps: int) -> str:
    """Seed 002's commitment, from a fresh run of its model (``rankwall experiment attention-trajectory``)."""
    reached = (
        f"reaches m >= 0.9 at step {c['window'][1]}" if c["committed"] else f"never reaches m = 0.9 in {steps:,} steps"
    )
    return (
        f"fresh run: head {c['head']} (previous token on {c['final_previous']:.0%} of rows at the end) crosses "
        f"m = 0.2 at step {c['window'][0]} and {reached}, ending at m = {c['final_m']:.2f}; within 0.01 of that "
        f"from step {c['hold_from']} ({c['hold_steps']} steps), held-out loss "
        f"{c['valid_loss_over_hold'][0]:.2f} -> {c['valid_loss_over_hold'][1]:.2f}; control head "
        f"{c['control']['head']} ends at m = "
        f"{c['control']['final_m']:.2f}, previous token on {c['control']['final_previous']:.0%}"
    )


def _control_head(c: dict, trajectory: dict) -> str:
    """Seed 002's control head, from a fresh run of its model: the other head with the largest
    previous-token share at the end, beside the head the run follows."""
    control = c["control"]
    share = trajectory["heads"][control["head"]]["previous"]
    peak = max(range(len(share)), key=lambda i: share[i] or 0.0)
    rule = "has" if control["found_the_same_rule"] else "has not"
    return (
        f"fresh run: control head {control['head']} ends at m = {control['final_m']:.2f}, previous token on "
        f"{control['final_previous']:.0%} (at most {share[peak]:.0%}, step {trajectory['steps'][peak]}): at the end "
        f"it {rule} found the previous-token rule; routing gain {control['final_gain_over_committed']:.2f}x that "
        f"of head {c['head']} (m = {c['final_m']:.2f}, previous token on {c['final_previous']:.0%})"
    )


def _fresh_previous_token_head(final: dict) -> str:
    """The previous-token head of seed 002's architecture trained afresh (the head the run follows)."""
    layer, head = (int(i) for i in final["committed"].split("."))
    h = next(h for h in final["ranking"] if (h["layer"], h["head"]) == (layer, head))
    return (
        f"seed 002's architecture trained afresh, head {final['committed']}: previous token on "
        f"{h['previous_token_share']:.1%} of rows, {h['share_m_above_0.9']:.1%} of rows past 0.9, median m "
        f"{h['median_m']:.2f}"
    )


def _turnover(c: dict) -> str:
    return (
        f"fresh run, head {c['head']}: median gain peaks at {c['peak_gain']:.4f} at step {c['peak_step']}, where "
        f"m = {c['m_at_peak']:.2f}; {c['final_gain']:.4f} at the end (m = {c['final_m']:.2f})"
    )


def _trajectory_fit(final: dict) -> str:
    fit = final["fit"]
    return (
        f"seed 002's architecture trained afresh: exponent {fit['slope']:.2f}, constant {fit['constant']:.3f} "
        f"({fit['rows']:,} held-out rows)"
    )


def _trajectory_ablations(final: dict) -> str:
    a = final["ablations"]
    return (
        f"fresh run, head {final['committed']}: zeroed {a['zero']['delta']:+.3f} (sd {a['zero']['sd']:.3f}), "
        f"shift-by-one {a['shift']['delta']:+.4f} (sd {a['shift']['sd']:.4f}), a same-layer head zeroed "
        f"{a['zero_same_layer_head']['delta']:+.4f} ({a['draws']} draws)"
    )


def _generations(records: list[dict]) -> str:
    """Table 1 in miniature: how long each tied SpamLang miniature repeats its seed token."""
    parts = [
        f"V = {r['V']:,}: {r['mean_run']:.1f} of {r['length']} steps ({r['never_stops']:.0%} never stop)"
        for r in records
        if r["tied"]
    ]
    head = f"tied miniatures at temperature {records[0]['temperature']}, mean run of the seed token: "
    return head + ", ".join(parts)


def _mos_lm(records: list[dict], key: str, spec: str) -> str:
    main = {r["head"]: r for r in records if r["head"] != "mos" or r["K"] == records[2]["K"]}
    return ", ".join(f"{head} {format(main[head][key], spec)}" for head in ("softmax", "moc", "mos"))


def _mos_sweep(records: list[dict]) -> str:
    mos = sorted((r for r in records if r["head"] == "mos"), key=lambda r: r["K"])
    return "MoS by K: " + ", ".join(
        f"K = {r['K']}: perplexity {r['perplexity']:.1f}, numerical rank {r['numerical_rank']['1e-03']}" for r in mos
    )


def _gap(sweep: dict) -> float:
    return sweep["runs"][0]["valid_loss"][-1] - sweep["runs"][-1]["valid_loss"][-1]


def _orderings_figure(name: str, what: str) -> Recorded:
    """The counts of a recorded `rankwall orderings` run (docs/_static/orderings/NAME.json)."""
    file = f"orderings/{name}.json"
    return Recorded(
        (Pointer(file, ("counts",)), Pointer(file, ("k",))),
        lambda counts, k: (
            f"{what}, k = {k}: {counts['realisable']} realisable, "
            f"{counts['unrealisable']} unrealisable, {counts['undecided']} undecided"
        ),
    )


# --------------------------------------------------------------------------- the rows

ROWS: tuple[Row, ...] = (
    # ---- seed 000: "Lost in Backpropagation"
    Row(
        "000",
        "Cor. A.3",
        "log softmax(A) has rank at most rank(A) + 1, so a rank-D logit matrix "
        "gives log-probabilities of rank at most D + 1",
        Status.REPRODUCED,
        "error_rank",
        "rankwall verify 'logprob-rank.*'",
        (Checked(("logprob-rank.log-softmax", "logprob-rank.bottleneck")),),
        "the statement is lost and reconstructed from the proof that remains; D + 1 holds without an output "
        "bias (D + 2 with one)",
        "thm-logprob",
    ),
    Row(
        "000",
        "Prop. A.2",
        "cross-entropy is smallest at the empirical conditionals; the excess is a "
        "frequency-weighted sum of KL divergences",
        Status.REPRODUCED,
        "expressivity",
        "rankwall verify expressivity.gibbs",
        (Checked(("expressivity.gibbs",)),),
        "the statement is lost; the seed's references call it Proposition A.2",
        "thm-gibbs",
    ),
    Row(
        "000",
        "§2.1, Prop. A.4, B.1",
        "at D >= 2, without a bias, any token can be the argmax with any "
        "top-1 probability, to arbitrary precision and for any V",
        Status.REPRODUCED,
        "expressivity",
        "rankwall verify expressivity.top1-witness",
        (Checked(("expressivity.top1-witness",)),),
        "reconstructed, and stronger than stated: every top-1 probability in (1/V, 1) exactly, precision "
        "needed only at 1",
        "thm-top1",
    ),
    Row(
        "000",
        "§2.1, Prop. A.4 (D >= 2)",
        "two hidden dimensions suffice, without a bias",
        Status.REPRODUCED,
        "expressivity",
        "rankwall verify expressivity.d1-bias-argmax",
        (
            Checked(
                (
                    "expressivity.top1-witness",
                    "expressivity.d1-bias-argmax",
                    "expressivity.top1-witness[d1-without-bias]",
                )
            ),
        ),
        "holds as stated (D >= 2 suffices, EX.2); beyond it, for V >= 3 D = 1 does not, with or without a "
        "bias: a bias makes every token the argmax but at most two reach every top-1 probability (EX.3); "
        "V = 2 needs only D = 1 without a bias",
        "thm-d1",
    ),
    Row(
        "000",
        "§2.2, Eq. 7",
        "a gradient step on H and W moves the logits by a matrix of rank at most 2D",
        Status.REPRODUCED,
        "updates",
        "rankwall verify 'updates.*-rank'",
        (Checked(("updates.exact-step-rank", "updates.first-order-rank")),),
        "",
        "thm-update-rank",
    ),
    Row(
        "000",
        "§2.2, Result 1",
        "the logit gradient has full rank V",
        Status.REFUTED,
        "updates",
        "rankwall verify error-rank.unique-continuation",
        (Computed(_rank_v_minus_one), Checked(("error-rank.unique-continuation", "updates.gradient-rank"))),
        "false as written, for every P: every row of P - Ñ sums to zero, so the rank is at most V - 1; an "
        "erratum in an informal summary, since the seed's own next paragraph, Result 2 and the proof of A.7 "
        "(B.3) say V - 1 (the next row)",
        "thm-logit-gradient",
    ),
    Row(
        "000",
        "§2.2, Prop. A.5",
        "when many distinct tokens are each the unique continuation of a context, "
        "rank(P - Ñ) >= min(#distinct such tokens, V - 1) for every positive P",
        Status.REPRODUCED,
        "error_rank",
        "rankwall verify 'error-rank.*'",
        (Checked(("error-rank.unique-continuation", "error-rank.wcdd")),),
        "the statement is lost and its proof (B.2) is empty: reconstructed from the §2.2 sketch, positivity "
        "of P named, the proof ours",
        "thm-unique",
    ),
    Row(
        "000",
        "Prop. A.6",
        "no rescaled rank-2D update gets closer to the gradient than its singular values beyond 2D (Eckart-Young)",
        Status.REPRODUCED,
        "updates",
        "rankwall verify 'updates.eckart-young*'",
        (Checked(("updates.eckart-young", "updates.eckart-young-attained")),),
        "the statement is lost and reconstructed from its one-line proof",
        "thm-eckart-young",
    ),
    Row(
        "000",
        "§2.4, App. A.3.1",
        "the bound of Prop. A.6 is non-vacuous: the singular values of the logit gradient beyond 2D are not negligible",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment gradient-tail",
        (Recorded((Pointer(GRADIENT_TAIL, ("heads",)), Pointer(GRADIENT_TAIL, ("D",))), _gradient_tail),),
        "positive, certified, on SmolLM2 once a batch has more than 2D tokens, and small at 2,048 tokens; every "
        "spot-check batch (n <= 1,024 < 2D) has a tail of exactly 0, so Figure 7's evidence cannot bear on it; "
        "the seed's 500,000-token batches are beyond two cores",
        "thm-eckart-young",
    ),
    Row(
        "000",
        "§2.2",
        "the first-order optimal logit update is the logit gradient diag(f)(P - Ñ), the gradient "
        "of the frequency-weighted cross-entropy",
        Status.REPRODUCED,
        "updates",
        "none (autograd)",
        (Computed(_weighted_cross_entropy_gradient),),
        "",
        "thm-logit-gradient",
    ),
    Row(
        "000",
        "§3.2",
        "even at the largest V, each distinct token of SpamLang occurs roughly 300 times in expectation",
        Status.REPRODUCED,
        "experiments",
        "none (arithmetic)",
        (Computed(_sightings_at_largest_V),),
        "41M tokens over V = 131,072; 300 is the floor, at the largest V, and smaller vocabularies saw each "
        "token far more often",
    ),
    Row(
        "000",
        "§2.3, Result 2; Prop. A.7, B.3",
        "near convergence a mini-batch's prediction error "
        "has rank close to V - 1; under condition (9) it keeps the sign pattern of Ñ - Ñ^B",
        Status.QUALIFIED,
        "error_rank",
        "rankwall verify 'error-rank.mini-batch*'",
        (
            Checked(
                (
                    "error-rank.mini-batch",
                    "error-rank.mini-batch-signs",
                    "error-rank.mini-batch-signs[signs-everywhere]",
                    "error-rank.mini-batch-limit",
                )
            ),
        ),
        "the rank bound min(k_B, V - 1) needs no closeness to convergence when P > 0 (it is A.5 on Ñ^B); the "
        "sign pattern of B.3 holds only on the support of Ñ, and fails off it",
        "thm-batch",
    ),
    Row(
        "000",
        "§2.3, Cor. A.8",
        "even mini-batch gradients are high-rank, and a rank-D head cannot follow them",
        Status.QUALIFIED,
        "error_rank",
        "rankwall verify error-rank.mini-batch 'updates.eckart-young'",
        (Checked(("updates.eckart-young", "error-rank.mini-batch")),),
        "never stated in the seed, only cited; reconstructed as the mini-batch form of A.6, with a positive "
        "lower bound on the residual; checked through its ingredients",
        "thm-batch-corollary",
    ),
    Row(
        "000",
        "§2.3, Eq. 10",
        "for any head g, the gradient reaching H passes through a Jacobian of rank at most D",
        Status.REPRODUCED,
        "heads",
        "rankwall verify heads.jacobian-rank",
        (Checked(("heads.jacobian-rank",)),),
        "true by shape; checked as the exact rank of d log p / dh, which is D - 1 when 1 is in col W",
        "thm-heads-jacobian",
    ),
    Row(
        "000",
        "§1, §2.4, §3.3, §5; Eq. 1, Fig. 4(a)",
        "95-99% of the logit-gradient norm is destroyed in ker W^T, across five model families",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded(
                (Pointer(SPOT, ("eq1", "destroyed")), Pointer(SPOT, ("eq1", "paper_destroyed_range"))),
                lambda r, paper: f"SmolLM2-135M destroys {r:.4f} (seed: {_range(paper)})",
            ),
        ),
        "one model, and its share lies above the seed's range, barely below that of a random head of its shape",
        "thm-compression",
    ),
    Row(
        "000",
        "§2.4, Fig. 4(b)",
        "cosine between the gradient and what survives: only 0.1-0.2",
        Status.REPRODUCED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (Recorded((Pointer(SPOT, ("eq1", "cosine")),), lambda c: f"SmolLM2-135M cosine {c:.4f}"),),
        "one model (SmolLM2-135M, wikitext-2), inside the range",
        "thm-compression",
    ),
    Row(
        "000",
        "§3.3, Fig. 4(b)",
        "most cosines lie between 0.1 and 0.3",
        Status.REPRODUCED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded(
                (Pointer(SPOT, ("eq1", "cosine")), Pointer(SPOT, ("eq1", "paper_cosine_range"))),
                lambda c, paper: f"SmolLM2-135M cosine {c:.4f} (recorded seed range {_range(paper)})",
            ),
        ),
        "one model, inside the range",
        "thm-compression",
    ),
    Row(
        "000",
        "§3.3, Fig. 4",
        "within each family the destroyed share falls as D grows",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment lowrank-heads",
        (
            Recorded(
                (Pointer(LOWRANK, ("bpe", "runs")),),
                lambda runs: (
                    "trained W = AB heads, V = 4,096, destroyed at the end (random subspace): "
                    + ", ".join(
                        f"D = {r['D']}: {r['final_heads']['trained']['destroyed']:.3f} "
                        f"({r['final_heads']['random_subspace_same_gradient']['destroyed']:.3f})"
                        for r in runs
                    )
                ),
            ),
        ),
        "a 2-block Transformer on tinyshakespeare BPE, not five pretrained families",
        "thm-compression",
    ),
    Row(
        "000",
        "§3.3, App. E",
        "the destroyed share and the cosine stay nearly constant through training (OLMo2-1B checkpoints)",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment lowrank-heads",
        (
            Recorded(
                (Pointer(LOWRANK, ("bpe", "runs")),),
                lambda runs: (
                    "destroyed share over the evaluations, min to max: "
                    + ", ".join(
                        f"D = {r['D']}: {min(r['eq1']['destroyed']):.3f} to {max(r['eq1']['destroyed']):.3f}"
                        for r in runs
                    )
                ),
            ),
        ),
        "one short training run per D, on the first validation batch",
        "thm-compression",
    ),
    Row(
        "000",
        "§3.3, Fig. 5",
        "the observed token's negative coefficient keeps its sign under the projection",
        Status.REPRODUCED,
        "experiments",
        "rankwall experiment sign-agreement",
        (
            Recorded(
                (Pointer(SIGNS, ("heads",)), Pointer(SIGNS, ("tokens",))),
                lambda heads, n: (
                    f"kept on {heads[TRAINED]['target_sign_agreement']:.1%} of {n} tokens by "
                    f"SmolLM2's head, {heads[RANDOM]['target_sign_agreement']:.1%} by a random head of its shape"
                ),
            ),
        ),
        "one model; a random head keeps it too, so it is the geometry, not training",
    ),
    Row(
        "000",
        "§3.3, Fig. 5",
        "the first 5-10 coefficients shrink strongly but stay correlated with the full gradient",
        Status.REPRODUCED,
        "experiments",
        "rankwall experiment sign-agreement",
        (
            Recorded(
                (Pointer(SIGNS, ("heads",)), Pointer(SIGNS, ("chance_sign_agreement",))),
                lambda heads, chance: (
                    "sign kept on the top 10: "
                    f"SmolLM2 {heads[TRAINED]['top_k_sign_agreement']['10']:.3f}, random head "
                    f"{heads[RANDOM]['top_k_sign_agreement']['10']:.3f}, chance {chance:.3f}"
                ),
            ),
        ),
        "the seed claims correlation only, and the top 10 keep their sign above chance, as the rows beside it "
        "are reproduced; a random head of the same shape keeps more, so nothing here is learned alignment",
    ),
    Row(
        "000",
        "§3.3, Fig. 5",
        "the projected gradient puts a larger share of its norm in the tail of low-probability tokens, as noise",
        Status.REPRODUCED,
        "experiments",
        "rankwall experiment sign-agreement",
        (
            Recorded(
                (Pointer(SIGNS, ("heads",)),),
                lambda heads: (
                    "tail share of the squared norm, before -> after: SmolLM2 "
                    f"{heads[TRAINED]['tail_share_squared']['before']:.1e} -> "
                    f"{heads[TRAINED]['tail_share_squared']['after']:.3f}, random head "
                    f"{heads[RANDOM]['tail_share_squared']['after']:.3f}"
                ),
            ),
        ),
        "one model; a random head of its shape moves as much of the norm to the tail",
    ),
    Row(
        "000",
        "§3.4, Fig. 6",
        "for the same update norm, moving H along its gradient lowers the loss "
        "orders of magnitude less than moving the logits along theirs",
        Status.REPRODUCED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded(
                (Pointer(SPOT, ("update_efficiency",)),),
                lambda e: (
                    f"SmolLM2-135M at {e['fractions'][0]:g} of the norm: "
                    f"{e['logit gradient'][0] / e['hidden-state update'][0]:.0f}x less"
                ),
            ),
        ),
        "one model, 1,024 tokens of wikitext-2",
        "thm-compression",
    ),
    Row(
        "000",
        "§3.4, Fig. 6",
        "the update along the H-gradient gets more efficient as D grows",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment efficiency-anatomy",
        (Recorded((Pointer(ANATOMY, ("heads",)),), _efficiency_against_subspace),),
        "the random-head ratios are sqrt(V/D), the identity of a random D-dimensional subspace, not a "
        "miniature of trained heads; the claim about trained families needs trained heads at several D",
        "thm-compression",
    ),
    Row(
        "000",
        "§3.4, Fig. 6",
        "models that share D (Pythia 1B and 1.4B) give the same curve, whatever their size",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment efficiency-depth",
        (Recorded((Pointer(DEPTH, ("collapse",)),), _depth_collapse),),
        "three small Transformers at V = 4,096, one seed, 400 steps: two sharing D = 128 at two depths (1.45M "
        "and 1.85M parameters) beside a D = 64 control; the pair drifts apart slowly with training",
    ),
    Row(
        "000",
        "§2.4, App. A.3.1, Fig. 7(a)",
        "the logit gradient's rank grows with the batch and approaches V",
        Status.IN_MINIATURE,
        "error_rank",
        "rankwall experiment batch-rank",
        (
            Computed(_batch_rank_grows),
            Checked(("error-rank.mini-batch",)),
            Recorded(
                (Pointer(SPOT, ("gradient_rank",)), Pointer(SPOT, ("V",))),
                lambda g, V: (
                    f"SmolLM2: certified rank = n at {sum(r['certified_rank'] == r['tokens'] for r in g)} "
                    f"of {len(g)} batch sizes n = {g[0]['tokens']}..{g[-1]['tokens']} (V = {V:,})"
                ),
            ),
        ),
        "smoothed n-gram models on tinyshakespeare characters approach V - 1 (the most possible); SmolLM2's "
        "batches of at most 1,024 tokens stay far below its V",
        "thm-batch",
    ),
    Row(
        "000",
        "§2.4, App. A.3.1, Fig. 7(b)",
        "70% of the gradient in under 1,000 components; 99.9% needs up to 30,000 at 500,000 tokens",
        Status.IN_MINIATURE,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded(
                (Pointer(SPOT, ("gradient_rank", -1)),),
                lambda r: (
                    f"at {r['tokens']:,} tokens: 70% of the norm in {r['components_70']}, 99.9% in "
                    f"{r['components_99.9']} components"
                ),
            ),
        ),
        "1,024 tokens, not 500,000; the seed does not say whether it counts norm or energy",
    ),
    Row(
        "000",
        "§3.2, Fig. 3",
        "SpamLang at fixed D: convergence gets harder as V grows",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment spamlang",
        (
            Recorded(
                (Pointer(EXPERIMENTS + "spamlang.json"),),
                lambda runs: (
                    "loss / log V after the run, tied: "
                    + ", ".join(f"V = {V:,}: {x:.3f}" for V, x in _spam(runs, True).items())
                ),
            ),
        ),
        "D = 64 and 150 steps on two cores; fewer sightings per token at large V confound the sweep",
    ),
    Row(
        "000",
        "§3.2, App. G",
        "weight tying may make the SpamLang solution easier to reach",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment spamlang",
        (Recorded((Pointer(EXPERIMENTS + "spamlang.json"),), _tying),),
        "the same miniature runs",
    ),
    Row(
        "000",
        "§1, §3.1, Fig. 2(a)",
        "with the same backbone, D = 4,096 reaches D = 32's final loss 16x sooner",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment lowrank-heads",
        (
            Recorded(
                (Pointer(EXPERIMENTS + "lowrank_heads.json", ("bpe",)),),
                lambda s: (
                    f"V = {s['V']:,}, D = {s['runs'][-1]['D']} reaches D = {s['runs'][0]['D']}'s final "
                    f"loss {s['speedup_largest_over_smallest_D']:.2f}x sooner"
                ),
            ),
        ),
        "a 2-block Transformer on tinyshakespeare BPE, D = 4 to 128",
    ),
    Row(
        "000",
        "§3.1, Fig. 2(a)",
        "the validation losses are separated by consistent gaps along training",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment lowrank-heads",
        (Recorded((Pointer(EXPERIMENTS + "lowrank_heads.json", ("bpe", "runs")),), _ordered),),
        "the same miniature runs",
    ),
    Row(
        "000",
        "§3.1, Fig. 2(b)",
        "downstream scores converge faster with D; D = 4,096 beats D = 2,048 by +0.55 on average",
        Status.OUT_OF_REACH,
        "experiments",
        "none",
        (),
        "2B-parameter models and zero-shot benchmarks; no run here trains past D = 128 on a binding vocabulary",
    ),
    Row(
        "000",
        "§3.2, Fig. 3(b)",
        "sensitivity to the learning rate grows with V, until no tested rate converges",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment spamlang-rates",
        (
            Recorded(
                (Pointer(RATES, ("by_V",)), Pointer(RATES, ("criterion",)), Pointer(RATES, ("steps",))),
                _rates,
            ),
        ),
        "the SpamLang miniature (untied head) on a half-decade grid of Adam rates at three V, each V given "
        "the same steps: the largest V also sees each token least often, which alone can stop convergence",
    ),
    Row(
        "000",
        "§3.2, Table 1",
        "the repetition mechanism is only partially learned: models repeat a token for a few steps only",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment spamlang-generations",
        (Recorded((Pointer(GENERATIONS, ("records",)),), _generations),),
        "context-free SpamLang miniatures at D = 64, V up to 16,384 (past it 150 steps show each token about once "
        "or not at all), sampled at the seed's temperature 0.9",
    ),
    Row(
        "000",
        "App. G.1",
        "weight decay had minimal impact; D = 32,768 at learning rate 1e-4 ends with losses 0.2-0.4",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment spamlang",
        (
            Recorded(
                (Pointer(EXPERIMENTS + "spamlang.json"),), lambda runs: f"largest D here: {max(r['D'] for r in runs):,}"
            ),
        ),
        "a head of width 32,768 at V up to 131,072 is beyond two cores",
    ),
    Row(
        "000",
        "§3.2",
        "for any V and D >= 2, hand-picked weights reach a loss arbitrarily close to 0 on SpamLang",
        Status.REPRODUCED,
        "expressivity",
        "rankwall verify expressivity.top1-witness",
        (Computed(_loss_to_zero), Checked(("expressivity.top1-witness",))),
        "the head's part of the argument (Prop. A.4); the backbone's identity map is the seed's citation",
        "thm-top1",
    ),
    Row(
        "000",
        "App. A.3, A.3.1",
        "|C^uu| ≃ V, or at least >> D; in batches of 1e5-1e7 tokens, the contexts "
        "seen once with positive entropy are not far below V",
        Status.IN_MINIATURE,
        "error_rank",
        "rankwall verify error-rank.unique-continuation",
        (Computed(_unique_continuations), Checked(("error-rank.unique-continuation",))),
        "tinyshakespeare n-grams, not a pretraining corpus; a batch of 8,192 tokens, not 1e5-1e7",
        "thm-unique",
    ),
    Row(
        "000",
        "App. A.3.1",
        "empirical ranks count the diagonal entries of R in a QR above 1e-6",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (Computed(_absolute_threshold),),
        "an absolute threshold certifies nothing and moves with the loss's normalisation; rankwall's ranks "
        "are certified by a Weyl margin relative to sigma_1",
    ),
    Row(
        "000",
        "§2.4 against App. A.3.1",
        "a small number of components holds 50-70% of the signal (§2.4); 70% needs fewer than 1,000 components (A.3.1)",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded(
                (Pointer(SPOT, ("gradient_rank", -1)),),
                lambda r: (
                    f"SmolLM2 at {r['tokens']:,} tokens: 70% of the norm in {r['components_70']} components, "
                    f"which is {0.7**2:.0%} of the energy"
                ),
            ),
        ),
        "the two passages agree only if 'a small number' is under 1,000; neither says whether it counts the "
        "norm or the energy",
    ),
    Row(
        "000",
        "§4",
        "some orderings of the next-token probabilities cannot be reached when D < V (after Grivas et al.)",
        Status.QUALIFIED,
        "models",
        "rankwall orderings --k 3 --json",
        (
            Checked(("expressivity.argmaxable-vs-hull", "expressivity.argmaxable-vs-hull[every-token-argmaxable]")),
            Recorded((Pointer(SPOT, ("unargmaxable",)),), lambda never: f"SmolLM2: {len(never)} tokens never first"),
            *(
                _orderings_figure(name, what)
                for name, what in (
                    ("smollm2_k2", "SmolLM2"),
                    ("smollm2_k3", "SmolLM2"),
                    ("random_k3", "random head"),
                    ("smollm2_twins_k2", "SmolLM2, the pool 5, 7, 100, 200, 36743"),
                )
            ),
        ),
        "top-2 and top-3 orderings decided with exact certificates on 200 uniform samples each: on SmolLM2 none "
        "is unrealisable (4 of 200 undecided at k = 3), and unreachable orderings come from duplicated rows; "
        "'rarely in practice' certified on the sample, not over all orderings",
        "thm-orderings",
    ),
    # ---- seed 001: the softmax bottleneck and the mixture of softmaxes
    Row(
        "001",
        "Property 2",
        "row-shifted versions of A (A + Λ1^T) differ in rank by at most one",
        Status.REPRODUCED,
        "error_rank",
        "rankwall verify logprob-rank.row-shift",
        (Checked(("logprob-rank.row-shift",)),),
        "",
        "thm-logprob",
    ),
    Row(
        "001",
        "the argument; mixture of contexts",
        "softmax logits, and a mixture of contexts, keep log P at the rank of a d-wide factorization",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment mos-rank",
        (
            Checked(("heads.softmax-moc-rank",)),
            Recorded(
                (Pointer(EXPERIMENTS + "mos_rank.json", ("records",)),),
                lambda rec: "softmax and MoC, every K: " + _rank_cells(rec, ("softmax", "moc")),
            ),
        ),
        "the ceiling is d + 1, not d: the row shift adds one",
        "thm-heads",
    ),
    Row(
        "001",
        "mixture of softmaxes",
        "log of a mixture of K softmaxes has no rank ceiling; generically full rank",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment mos-rank",
        (
            Checked(("heads.nonlinear-heads-exceed",)),
            Recorded(
                (
                    Pointer(EXPERIMENTS + "mos_rank.json", ("saturation_K",)),
                    Pointer(EXPERIMENTS + "mos_rank.json", ("ceiling",)),
                ),
                lambda sat, ceiling: (
                    "MoS pinned at min(N, V) = "
                    + str(ceiling)
                    + ": "
                    + ", ".join(f"D = {D} from K = {K}" if K else f"D = {D} not certified" for D, K in sat.items())
                ),
            ),
        ),
        "generic only with min(N, V) >= d + 2 and given one certified witness (and not for every nonlinear "
        "head); at D = 2 the float64 certificate stops short of the ceiling",
        "thm-heads",
    ),
    Row(
        "001",
        "the evidence (PTB)",
        "measured ranks: softmax d = 400 gives 400, MoC d = 280 gives 280, MoS gives 9,981 of 10,000",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment mos-rank",
        (
            Recorded(
                (Pointer(EXPERIMENTS + "mos_rank.json", ("records",)),),
                lambda rec: (
                    "certified: softmax "
                    + _rank_cells(rec, ("softmax",))
                    + "; MoS K >= 2 "
                    + _rank_cells(rec, ("mos",), K_from=2)
                ),
            ),
        ),
        "reproduces no trained-PTB rank: the certified ranks here are of random heads, d + 1 by (a); the "
        "essay's reference decoder (nn.Linear) has a bias, so its ceiling is d + 2 (402 and 282), and the "
        "essay does not say whether it measured log P, centred log P or the logits",
        "thm-heads",
    ),
    Row(
        "001",
        "the evidence (PTB)",
        "rank climbs with K (6,467, 8,930, 9,973) and saturates at 9,981 by K = 15",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment mos-rank",
        (
            Recorded(
                (Pointer(EXPERIMENTS + "mos_rank.json", ("records",)),),
                lambda rec: (
                    "D = 8, numerical rank above 1e-3 for K = 2..64: "
                    + ", ".join(
                        str(r["numerical_rank"]["1e-03"])
                        for r in rec
                        if r["head"] == "mos" and r["D"] == 8 and r["K"] >= 2
                    )
                ),
            ),
        ),
        "for generic heads the certified rank jumps to min(N, V) at K = 2; the climb is about trained models",
    ),
    Row(
        "001",
        "the evidence (PTB)",
        "perplexity is best at K = 15 and worse at K = 20, where rank has saturated",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment mos-lm",
        (Recorded((Pointer(MOS_LM, ("records",)),), _mos_sweep),),
        "the miniature K sweep (400 steps, V = 1,024, d = 32, K up to 24) has undertrained mixtures whose log P has "
        "a numerical rank of a few at every K: its perplexity wanders with no trend, so it neither shows nor tests "
        "the turn at K = 15 to 20",
    ),
    Row(
        "001",
        "the evidence (spectra)",
        "softmax and MoC put about 96% of normalized singular values below 1e-9; MoS's are spread from 1e-5 upward",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment mos-rank",
        (
            Recorded(
                (Pointer(EXPERIMENTS + "mos_rank.json", ("records",)), Pointer(EXPERIMENTS + "mos_rank.json", ("V",))),
                lambda rec, V: (
                    f"D = 8, N = V = {V}: below 1e-9 softmax {_below(rec, 'softmax', 8)} = 1 - (D + 1)/V "
                    f"= {1 - (8 + 1) / V:.1%}, MoC {_below(rec, 'moc', 8)}, "
                    f"MoS (K >= 2) {_below(rec, 'mos', 8, 2)}; MoS smallest {_smallest(rec, 'mos', 8, 2):.0e}"
                ),
            ),
            Computed(lambda: f"the seed's 96% is 1 - d/V = 1 - 400/10,000 = {1 - 400 / 10_000:.0%}"),
        ),
        "the 96% is arithmetic of the rank (1 - d/V), not separate evidence; the MoS part fails here: generic MoS "
        "spectra reach far below 1e-5",
        "thm-heads",
    ),
    Row(
        "001",
        "the inverse experiment (text8)",
        "where rank(A) <= |V| is below d, the bottleneck-breaking head changes nothing",
        Status.IN_MINIATURE,
        "experiments",
        "rankwall experiment lowrank-heads",
        (
            Recorded(
                (
                    Pointer(EXPERIMENTS + "lowrank_heads.json", ("characters",)),
                    Pointer(EXPERIMENTS + "lowrank_heads.json", ("bpe",)),
                ),
                lambda ch, bpe: (
                    f"characters (V = {ch['V']}): smallest-minus-largest D gap {_gap(ch):.3f} nats; "
                    f"BPE (V = {bpe['V']:,}): {_gap(bpe):.3f}"
                ),
            ),
        ),
        "a low-rank head against D, not MoS against softmax",
    ),
    Row(
        "001",
        "what happened to the idea (sigsoftmax)",
        "sigsoftmax, a one-softmax output nonlinearity, also escapes the rank limit",
        Status.REPRODUCED,
        "heads",
        "rankwall verify heads.nonlinear-heads-exceed",
        (Checked(("heads.nonlinear-heads-exceed",)),),
        "rank log P >= d + 2 certified on its witnesses, sigsoftmax among them; for almost every parameter, "
        "given one such witness (HD.1 (b))",
        "thm-heads",
    ),
    Row(
        "001",
        "the trap (Shazeer et al.)",
        "MoE layers are mixtures of contexts: they do not raise the rank of the output layer by one",
        Status.REPRODUCED,
        "heads",
        "rankwall verify heads.softmax-moc-rank",
        (Checked(("heads.softmax-moc-rank",)),),
        "the ceiling rank[W, 1] <= d + 1 holds whatever computes h, a backbone of MoE layers included "
        "(HD.1 (a)); that MoE is MoC is the paper's taxonomy, which nothing here checks",
        "thm-heads",
    ),
    Row(
        "001",
        "three controls (regularization)",
        "on 1B Word MoS trains 5.08 perplexity points lower; its "
        "generalization gap is a bit narrower, 0.71 against 1.30 (ratios 1.020 and 1.031)",
        Status.REPRODUCED,
        "experiments",
        "none (arithmetic)",
        (Computed(_regularization_control),),
        "the essay's arithmetic on its printed perplexities checks out; the perplexities need the trained models",
    ),
    Row(
        "001",
        "three controls (ablation)",
        "MoC is worse than MoS, and on WikiText-2 worse than its AWD-LSTM "
        "baseline (65.98 against 65.40); the baseline with MoS's hyperparameters is far worse (74.86 against 58.95)",
        Status.OUT_OF_REACH,
        "experiments",
        "none",
        (Computed(_ablation_controls),),
        "needs the trained AWD-LSTM, MoC and MoS models; the figure is only the printed values' arithmetic, "
        "which agrees with the essay's reading",
    ),
    Row(
        "001",
        "what happened to the idea (stolen probability)",
        "a token whose embedding lies inside the convex hull of the others can never be the argmax",
        Status.REPRODUCED,
        "expressivity",
        "rankwall verify expressivity.argmaxable-vs-hull",
        (Checked(("expressivity.argmaxable-vs-hull",)),),
        "",
        "thm-argmaxable",
    ),
    Row(
        "001",
        "what happened to the idea (Grivas et al.)",
        "13 of 150 public models have unargmaxable tokens, and they are rare",
        Status.QUALIFIED,
        "models",
        "rankwall argmax",
        (
            Recorded(
                (
                    Pointer(SPOT, ("unargmaxable",)),
                    Pointer(SPOT, ("V",)),
                    Pointer(SPOT, ("argmax_methods", "duplicate row")),
                ),
                lambda never, V, twins: (
                    f"SmolLM2-135M: {len(never)} of {V:,} tokens never the strict argmax, "
                    f"{twins} of them duplicate rows"
                ),
            ),
        ),
        "one model; every unargmaxable token ties an identical row of the quantized head",
        "thm-argmaxable",
    ),
    Row(
        "001",
        "the evidence (appendix)",
        "expected pairwise KL between contexts: softmax 4.763, MoC 4.864, MoS 5.284",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment mos-lm",
        (
            Recorded(
                (Pointer(MOS_LM, ("records",)),),
                lambda rec: "miniature, expected pairwise KL: " + _mos_lm(rec, "expected_pairwise_kl", ".3f"),
            ),
        ),
        "the miniature reverses the order: its mixture heads are undertrained (their contexts' distributions barely "
        "differ), so it does not bear on the trained PTB models",
    ),
    Row(
        "001",
        "Corollary 1",
        "if d < rank(A) - 1, then for any function family and any parameter some context has P_theta != P*",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Checked(("logprob-rank.bottleneck", "logprob-rank.bottleneck[at-most-d]")),
            Recorded(
                (Pointer(SPOT, ("log_probability_rank",)),),
                lambda r: (
                    f"SmolLM2 on {r['contexts']:,} contexts: rank log P certified {r['lower']}..{r['upper']} "
                    f"(D + 1 = {r['D'] + 1}); centred {r['centred']['lower']}..{r['centred']['upper']}, hidden size "
                    f"recovered {r['hidden_size_recovered']}; with a bias {r['head_with_bias']['lower']}"
                ),
            ),
        ),
        "holds as stated for heads without an output bias and P* > 0 (A = log P* must exist); with a bias the "
        "threshold is d + 2 (SmolLM2's head with a bias: 578); certified at both ends on SmolLM2's own float32 "
        "outputs",
        "thm-logp-rank",
    ),
    Row(
        "001",
        "two easy fixes, priced",
        "pushing d past a few hundred stopped helping on these benchmarks",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment lowrank-heads",
        (
            Recorded(
                (Pointer(LOWRANK, ("bpe", "runs")),),
                lambda runs: (
                    "nearest run: final validation loss by D, "
                    + ", ".join(f"D = {r['D']}: {r['valid_loss'][-1]:.3f}" for r in runs)
                ),
            ),
        ),
        "needs word-level language models trained at d in the hundreds; our largest binding D is 128, and "
        "every larger D still helped",
    ),
    Row(
        "001",
        "what it won",
        "MoS improves perplexity over softmax (PTB, WikiText-2, 1B Word: 5.67 points)",
        Status.OUT_OF_REACH,
        "experiments",
        "rankwall experiment mos-lm",
        (
            Recorded(
                (Pointer(MOS_LM, ("records",)),),
                lambda rec: "miniature at matched parameters, perplexity: " + _mos_lm(rec, "perplexity", ".1f"),
            ),
        ),
        "in the miniature (400 CPU steps) softmax at matched parameters wins: the mixtures are undertrained; trained "
        "MoS and softmax models on those corpora are still needed",
    ),
    Row(
        "001",
        "what it won (Switchboard)",
        "MoS in a Seq2Seq decoder wins on perplexity and every BLEU figure",
        Status.OUT_OF_REACH,
        "experiments",
        "none",
        (),
        "needs trained dialogue models",
    ),
    # ---- seed 002: the softmax Jacobian
    Row(
        "002",
        "the gradient is a variance",
        "u^T (diag p - pp^T) u = Var_p(u)",
        Status.REPRODUCED,
        "softmax_jacobian",
        "rankwall verify 'softmax-jacobian.*'",
        (Checked(("softmax-jacobian.variance-form", "softmax-jacobian.psd")),),
        "",
        "thm-variance",
    ),
    Row(
        "002",
        "how tight that is",
        "m(1 - m) <= ||J|| <= 2m(1 - m) for m >= 1/2; no violation in 25,443 random rows",
        Status.REPRODUCED,
        "softmax_jacobian",
        "rankwall verify 'softmax-jacobian.*-bound'",
        (
            Checked(("softmax-jacobian.lower-bound", "softmax-jacobian.upper-bound")),
            Recorded(
                (Pointer(SPOT, ("attention", "rows")), Pointer(SPOT, ("attention", "jacobian_bound_violations"))),
                lambda rows, bad: f"SmolLM2 attention: {bad} violations in {rows:,} rows",
            ),
        ),
        "both halves hold for every p, not only m >= 1/2",
        "thm-bounds",
    ),
    Row(
        "002",
        "how tight that is",
        "the upper end is attained (to nine digits)",
        Status.REPRODUCED,
        "softmax_jacobian",
        "rankwall verify softmax-jacobian.envelope-attained",
        (Checked(("softmax-jacobian.envelope-attained", "softmax-jacobian.envelope")),),
        "the exact envelope is min(m, 2m(1 - m)): below 2m(1 - m) when m < 1/2",
        "thm-envelope",
    ),
    Row(
        "002",
        "how tight that is",
        "the row's width does not enter: a 64-way softmax at m = 0.99 has the "
        "gradient capacity of a two-way one (they share their bounds)",
        Status.QUALIFIED,
        "softmax_jacobian",
        "rankwall verify 'softmax-jacobian.*'",
        (Computed(_width_does_not_enter), Checked(("softmax-jacobian.upper-bound",))),
        "true of the bounds, which depend on m alone; false of the norms, the 64-way row's being about half "
        "the two-way row's",
        "thm-bounds",
    ),
    Row(
        "002",
        "how tight that is",
        "the two curves are a factor (1 + m)/m apart, under 2.01 above m = 0.99",
        Status.QUALIFIED,
        "softmax_jacobian",
        "rankwall verify 'softmax-jacobian.*-bound'",
        (Computed(_bounds_ratio), Checked(("softmax-jacobian.lower-bound", "softmax-jacobian.upper-bound"))),
        "the stated bounds m(1 - m) .. 2m(1 - m) are exactly a factor 2 apart for every m; (1 + m)/m is "
        "(1 - m²)/(m(1 - m)), the trace ceiling over the lower bound, which the unseen figure may plot",
        "thm-bounds",
    ),
    Row(
        "002",
        "how tight that is",
        "tr J = 1 - Σp², a collision probability, not the entropy",
        Status.REPRODUCED,
        "softmax_jacobian",
        "rankwall verify softmax-jacobian.trace",
        (Checked(("softmax-jacobian.trace",)),),
        "",
        "thm-trace",
    ),
    Row(
        "002",
        "how tight that is",
        "J annihilates the constant direction: a row's logit gradients sum to "
        "zero (5.4e-8 of the row's scale measured)",
        Status.REPRODUCED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Checked(("softmax-jacobian.kernel", "softmax-jacobian.rank")),
            Recorded(
                (
                    Pointer(SPOT, ("attention", "row_sum_median")),
                    Pointer(SPOT, ("attention", "rows_summing_to_zero_within_float32_rounding")),
                ),
                lambda med, n: f"SmolLM2: median relative row sum {med:.1e}, {n:,} rows zero to float32 rounding",
            ),
        ),
        "J1 = 0 is SJ.1; the rank, |supp p| - 1, is new (SJ.3): the seed shows one zero eigenvalue",
        "thm-variance",
    ),
    Row(
        "002",
        "a bound that predicts",
        "the realised gain goes as (2m(1 - m))^1.03 with constant 0.128 (48,384 rows)",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded(
                (
                    Pointer(SPOT, ("attention", "gain_vs_capacity_log_slope")),
                    Pointer(SPOT, ("attention", "gain_vs_capacity_constant")),
                    Pointer(SPOT, ("attention", "rows")),
                ),
                lambda s, c, n: f"SmolLM2: exponent {s:.2f}, constant {c:.3f} ({n:,} rows)",
            ),
            Recorded((Pointer(TRAJECTORY, ("final",)),), _trajectory_fit),
        ),
        "on SmolLM2 and on the seed's architecture trained afresh the exponent is again near one; the constants differ",
        "thm-bounds",
    ),
    Row(
        "002",
        "a bound that predicts",
        "as a rate, a head at m = 0.98 changes its routing about 13x slower "
        "than at m = 0.5, at m = 0.9999 about 2,500x",
        Status.REPRODUCED,
        "softmax_jacobian",
        "none (a formula)",
        (Computed(_slowdown),),
        "",
        "thm-bounds",
    ),
    Row(
        "002",
        "the gradient is a variance",
        "12.8% of the model's attention rows put more than 0.9 on one position",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (Recorded((Pointer(SPOT, ("attention", "share_m_above_0.9")),), lambda s: f"SmolLM2: {s:.1%}"),),
        "a property of one model; SmolLM2 is another",
    ),
    Row(
        "002",
        "one head of sixteen",
        "a confident head passes almost no gradient: the saturated head passes 5.9x less than the next-lowest",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (Recorded((Pointer(SPOT, ("attention", "heads")),), _saturated_head),),
        "on SmolLM2 only at the extreme, m near 1; its previous-token heads (m 0.67 to 0.84) get as much "
        "score gradient as a baseline head",
        "thm-bounds",
    ),
    Row(
        "002",
        "the part that changes the story",
        "the saturated head is essential (zeroing it costs "
        "1.125 nats) yet replaceable (a fixed shift-by-one costs 0.0013)",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment attention-heads",
        (
            Recorded((Pointer(ATTENTION, ("chosen", 0)),), _essential),
            Recorded((Pointer(TRAJECTORY, ("final",)),), _trajectory_ablations),
        ),
        "essential and replaceable on SmolLM2, by a tenth of a nat, but that head is not saturated (its median m "
        "is in the figure), so the claim about a saturated head is untested there; on the seed's architecture "
        "trained afresh, see the figure",
    ),
    Row(
        "002",
        "when the commitment happened",
        "the head commits between steps 200 and 400, then holds for 800 steps while the loss falls from 2.03 to 1.68",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment attention-trajectory",
        (Recorded((Pointer(TRAJECTORY, ("commitment",)), Pointer(TRAJECTORY, ("steps",))), _commitment),),
        "our fresh run of the seed's architecture (its learning rate and batch are not given; ours: AdamW 1e-3, "
        "32 x 64 characters) grows a previous-token head that does not commit",
    ),
    Row(
        "002",
        "one head of sixteen",
        "head (0,3) at m = 0.046, where 2m(1 - m) = 0.088",
        Status.QUALIFIED,
        "softmax_jacobian",
        "rankwall verify softmax-jacobian.envelope",
        (Computed(_envelope_below_half), Checked(("softmax-jacobian.envelope",))),
        "below m = 1/2 the capacity is at most m, not 2m(1 - m): the envelope min(m, 2m(1 - m))",
        "thm-envelope",
    ),
    Row(
        "002",
        "a bound that predicts",
        "about an eighth of the capacity is used, and that fraction is roughly constant across confidence levels",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (Recorded((Pointer(SPOT, ("attention", "heads")),), _fraction_by_confidence),),
        "another model; a log-slope below one means the fraction changes with m",
        "thm-bounds",
    ),
    Row(
        "002",
        "when the commitment happened",
        "the realised gradient turns over at m = 0.21, peaking at 0.0358 around step 200",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment attention-trajectory",
        (Recorded((Pointer(TRAJECTORY, ("commitment",)),), _turnover),),
        "the same reading on our fresh run: the gain rises and turns over before the capacity 2m(1 - m) peaks",
    ),
    Row(
        "002",
        "the other two lines",
        "the trace identity holds on the model's rows to 1.9e-7",
        Status.REPRODUCED,
        "softmax_jacobian",
        "rankwall verify softmax-jacobian.trace",
        (Computed(_trace_in_float32), Checked(("softmax-jacobian.trace",))),
        "exact in real arithmetic; to float32 rounding on float32 rows",
        "thm-trace",
    ),
    Row(
        "002",
        "one head of sixteen; the part that changes the story",
        "5.9x against the nearest rival, 10.4x against the softest, and 43% of the distance from a uniform guess",
        Status.REPRODUCED,
        "models",
        "none (arithmetic)",
        (Computed(_seed002_arithmetic),),
        "the seed's arithmetic from its own printed values checks out; the measurements behind them need its model",
    ),
    Row(
        "002",
        "the part that changes the story",
        "replacing the head by a fixed shift-by-one costs about 841 times less than removing it",
        Status.QUALIFIED,
        "models",
        "none (arithmetic)",
        (Computed(_replace_versus_remove),),
        "the printed costs, 1.1252 and 0.0013 nats, give 866, not 841; 841 follows only from an unrounded "
        "shift cost near 0.00134",
    ),
    Row(
        "002",
        "one head of sixteen",
        "head (0,1) is a previous-token head: its argmax is one position back on "
        "99.8% of rows, and 94.6% of its rows are past 0.9",
        Status.QUALIFIED,
        "models",
        "rankwall spot --tokens 1024 --json",
        (
            Recorded((Pointer(SPOT, ("attention", "heads")),), _previous_token_head),
            Recorded((Pointer(TRAJECTORY, ("final",)),), _fresh_previous_token_head),
        ),
        "a head of the seed's model; the seed's architecture trained afresh (rankwall experiment "
        "attention-trajectory) grows a previous-token head that has not committed, so few of its rows are past 0.9, "
        "and SmolLM2's most previous-token head is far less confident",
    ),
    Row(
        "002",
        "when the commitment happened",
        "the control head (0,0) stops at m = 0.76 with 10x more routing "
        "gradient, its previous-token share still climbing from 0.921 to 0.988",
        Status.QUALIFIED,
        "experiments",
        "rankwall experiment attention-trajectory",
        (
            Recorded(
                (Pointer(TRAJECTORY, ("commitment",)), Pointer(TRAJECTORY, ("trajectory",))),
                _control_head,
            ),
        ),
        "our fresh run of the seed's architecture (its learning rate and batch are not given; ours: AdamW 1e-3, "
        "32 x 64 characters) has no committed head to set the control against: its previous-token head is still "
        "climbing past m = 1/2, and the control, the other head with the largest previous-token share, found the "
        "rule for a while and lost part of it, where the seed's control keeps it; so the seed's contrast (a "
        "control that stops short of commitment with far more routing gradient) is not tested here",
    ),
    Row(
        "002",
        "the part that changes the story; what to keep",
        "the 1/sqrt(d) scale of attention logits exists "
        "to keep m on the near side of the hump at initialisation, not for numerical stability",
        Status.QUALIFIED,
        "softmax_jacobian",
        "none (a computation)",
        (Computed(_scaled_attention_at_initialisation),),
        "the effect holds at initialisation: with the scale, unit Gaussian scores keep m far from 1, and without "
        "it the rows saturate; why the scale was introduced is its authors' reasoning, which nothing here checks",
        "thm-bounds",
    ),
)


# --------------------------------------------------------------------------- the statement index


#: Every theorem and lemma of the docs, collected from the family modules' ``STATEMENTS`` (and
#: :mod:`rankwall.checks.models`' for the models page).
STATEMENTS: tuple[Statement, ...] = tuple(
    statement for module in (*FAMILY_MODULES, models) for statement in getattr(module, "STATEMENTS", ())
)


def counts(rows: Sequence[Row] = ROWS) -> dict[Status, int]:
    """Rows per status, in the order of :class:`Status`."""
    tally = Counter(r.status for r in rows)
    return {s: tally[s] for s in Status}
