"""Real models, offline: loading (:mod:`rankwall.checks.models.loading`) and spot checks
(:mod:`rankwall.checks.models.spot`)."""

from rankwall.checks.engine.statements import Kind, Statement

#: The theorems of ``docs/models.md`` (collected by ``checks/companion/fidelity.py``).
STATEMENTS: tuple[Statement, ...] = (
    Statement(
        "thm-logp-rank",
        "MD.1",
        "models",
        "seed 001, Corollary 1, as corrected in ER.6 (c)",
        Kind.CORRECTED,
        ("logprob-rank.bottleneck",),
        (
            "tests/test_logprob_rank.py::TestTheModelsOwnLogProbabilities",
            "tests/test_logprob_rank.py::test_the_comparison_heads",
        ),
        "a corollary of ER.6 (c) on a real model's own float32 outputs, certified at both ends; D + 2 with a "
        "bias; the centred form is ours",
    ),
    Statement(
        "thm-orderings",
        "MD.2",
        "models",
        "seed 000, §4 (after Grivas et al.: unreachable orderings)",
        Kind.NEW,
        (),
        ("tests/test_orderings.py::TestPlantedHeads", "tests/test_orderings.py::TestInvariance"),
        "Gordan's alternative for the pairs of an ordering, with exact certificates either way",
    ),
    Statement(
        "thm-bounded-argmax",
        "MD.3",
        "models",
        "none (Grivas et al. 2022 bound h in a box)",
        Kind.NEW,
        ("expressivity.argmaxable-vs-hull",),
        (
            "tests/test_bounded_argmax.py::TestWithoutABias",
            "tests/test_bounded_argmax.py::TestWithABias",
            "tests/test_bounded_argmax.py::TestRMSNormRegion",
        ),
        "the region from the final RMSNorm gain; (iii) both directions, the converse by the minimax theorem",
    ),
)
