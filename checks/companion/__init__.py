"""The proof companion's data: the fidelity table (``fidelity``) and the shipped corpora (``data``,
``corpora/``)."""
