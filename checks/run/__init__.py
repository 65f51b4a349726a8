"""Running claims: the verify runner (``runner``), the counterexample search (``search``) and its
strategies' profiles (``strategies``), saved cases (``replay``), user claims (``loader``), Dask
(``distributed``) and output files (``outputs``)."""
