"""``python -m rankwall.checks.cli``: the ``rankwall`` command without its console script."""

from rankwall.checks.cli import main

raise SystemExit(main())
