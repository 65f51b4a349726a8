"""Two statements about the softmax Jacobian J = diag(p) − ppᵀ, stated with rankwall's public API.

rankwall search --claims examples/conjectures.py example.norm-below-1.9   # false: exit 1
rankwall verify --claims examples/conjectures.py example.trace-below-one  # true: exit 0
"""

from rankwall import declare
from rankwall import softmax_jacobian as sj

declare(
    "example.norm-below-1.9",
    statement="‖J‖₂ ≤ 1.9·m(1 − m)  (false: the runner-up row (m, 1 − m) has ‖J‖₂ = 2m(1 − m))",
    lhs=sj.norm,
    relation="<=",
    rhs=1.9 * sj.top * sj.complement,
    cases=sj.rows,
)

declare(
    "example.trace-below-one",
    statement="tr J ≤ 1  (true: tr J = 1 − Σ p_i² < 1)",
    lhs=sj.trace,
    relation="<=",
    rhs=1,
    cases=sj.rows,
)
