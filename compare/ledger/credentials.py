"""The ledger's secret guard: values about to be recorded are refused when they look like a credential, and what
servers say about themselves is recorded with credential values redacted."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.scrubbing import credential_shaped, names_env, redact_values, secret_name
from compare.ledger.errors import SecretInLedger


def check_no_secrets(value: Any, where: str) -> None:
    """Raises SecretInLedger if any key at any depth names a credential (api_key, authorization, *_token,
    secret, password, ...) or any string looks like one (`Bearer ...`, `sk-...`). A key ending in `_env` that
    holds an environment variable's name is allowed: it names where the secret lives, not the secret."""
    found = _find_secret(value, where)
    if found:
        raise SecretInLedger(f"{found} looks like a secret; the ledger never stores secrets. Record the name of "
                             "the environment variable that holds it (like api_key_env) instead")


def redact_secrets(value: Any) -> Any:
    """A copy with every credential value replaced by "[redacted]" (for what servers say about themselves:
    SGLang's server info lists its own api_key): the adapters' one rule."""
    return redact_values(value)


def _find_secret(value: Any, where: str) -> str | None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}"
            if secret_name(str(key)) and not names_env(str(key), item):
                return f"{path} (a credential-named key)"
            found = _find_secret(item, path)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _find_secret(item, f"{where}[{i}]")
            if found:
                return found
    elif isinstance(value, str) and credential_shaped(value):
        return f"{where} (its value looks like a key or bearer token)"
    return None
