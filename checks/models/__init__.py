"""Real models, offline: loading (:mod:`checks.models.loading`) and spot checks
(:mod:`checks.models.spot`)."""
