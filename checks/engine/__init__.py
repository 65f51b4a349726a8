"""The engine: cases, claims and their decision (``verdict``), quantities and statements over them
(``quantities``), exact reals (``reals``), what families share (``toolkit``), the rounding-error model
(``tolerance``), the statement index's types (``statements``) and the array backends (``backends``).
It imports no family, command, experiment or model (``tests/test_layers.py``)."""
