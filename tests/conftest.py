"""Suite-wide settings. Hypothesis: no wall-clock health checks or deadlines (CI machines and
parallel sessions are slow and noisy; speed is measured by explorer.bench, not by tests)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "explorer",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    max_examples=60,
)
settings.load_profile("explorer")

# Browser fixtures (Playwright with Debian's chromium) go below this line.
