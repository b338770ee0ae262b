"""Shared pytest configuration: hypothesis profiles and the PostgreSQL fixture plugin."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

# CI explores the same examples on every run (derandomize), so a red run reproduces on any
# machine with the same code. `python3 dev.py test --random` loads "random" instead: fresh
# examples each run, to look for what the fixed ones miss. Tests that set their own
# max_examples keep it in both profiles.
_common = dict(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile("ci", derandomize=True, print_blob=True, **_common)
settings.register_profile("random", derandomize=False, print_blob=True, **_common)
# `python3 dev.py mutate` loads "mutate": CI's examples, but a failure is reported as found
# rather than shrunk first. Shrinking decides nothing about whether a mutant is killed, and
# a stateful test can shrink for minutes per mutant.
settings.register_profile(
    "mutate", derandomize=True, phases=[Phase.explicit, Phase.reuse, Phase.generate], **_common
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

pytest_plugins = ["otel_fixture", "pg_fixture", "sandbox_fixture", "sshd_fixture"]
