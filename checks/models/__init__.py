"""Real models, offline: loading (:mod:`rankwall.checks.models.loading`) and spot checks
(:mod:`rankwall.checks.models.spot`)."""
