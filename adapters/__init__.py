"""One interface to a model endpoint (router, sglang, local), and the public face of the scrubbing rule every
stored or served text goes through: `scrub`, `redact_url`, `redact_values`, `secret_values`, `arm_secrets`
(from `adapters.scrubbing`, loaded on first use so that `python -m adapters.local_server` stays light)."""

from __future__ import annotations

from typing import Any

__all__ = ["arm_secrets", "redact_url", "redact_values", "scrub", "secret_values"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from adapters import scrubbing

        return getattr(scrubbing, name)
    raise AttributeError(f"module 'adapters' has no attribute {name!r}")
