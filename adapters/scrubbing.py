"""The one scrubbing rule for everything an adapter returns or stores: configured secret values (of any length)
and credentials embedded in URLs never leave an adapter, and server self-descriptions lose credential values
while keeping harmless fields such as `max_total_tokens` or `tokenizer_path`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit, urlunsplit

from adapters.base import AdapterError, ArmStart, CallAttempt

REDACTED = "[redacted]"

# Where a router arm's key comes from when it names no variable (adapters/router.py reads them in this order).
DEFAULT_KEY_ENVS = ("ROUTER_API_KEY", "ORCAROUTER_API_KEY", "OPENROUTER_API_KEY", "OPENAI_API_KEY")

# Words that make a name (a dict key, a query parameter) name a credential. "token" alone is a tokenizer word
# too (eos_token, max_total_tokens): only as the whole name, or after one of _TOKEN_OWNERS, is it a credential.
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pwd", "secret", "secrets", "authorization",
                           "credential", "credentials", "apikey", "cookie", "bearer", "signature", "sig", "jwt"})
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"),
                           ("master", "key"), ("security", "token")})
_TOKEN_OWNERS = frozenset({"access", "auth", "api", "bearer", "refresh", "id", "session", "hf", "github", "gh",
                           "oauth", "bot", "personal", "client", "router", "openai", "anthropic", "openrouter",
                           "security", "sas"})
_ALONE = ({"key"}, {"token"}, {"auth"})  # names that are a credential when they are the whole name

# Values that look like a credential whatever their name: a bearer header, OpenAI/Anthropic/HF/GitHub-style keys.
_CREDENTIAL_VALUE = re.compile(r"\bBearer\s+\S{4,}|\bBasic\s+[A-Za-z0-9+/=]{8,}|\bsk-[A-Za-z0-9_-]{12,}"
                               r"|\bhf_[A-Za-z0-9]{16,}|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abp]-[A-Za-z0-9-]{10,}",
                               re.IGNORECASE)
# A bearer credential quoted in free text (an echoed Authorization header): the credential goes, the word stays.
_BEARER = re.compile(r"\b(?P<scheme>Bearer)\s+(?!\[redacted\])\S{4,}")
# `scheme://userinfo@` inside free text: the userinfo goes, whatever it is.
_URL_USERINFO = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?P<userinfo>[^\s/?#@]+)@", re.IGNORECASE)
# `name=value` of a credential-named query parameter inside free text (a URL quoted in an error message).
_QUERY_PAIR = re.compile(r"(?P<lead>[?&#;])(?P<name>[A-Za-z0-9_.\-]+)=(?P<value>[^&#\s'\"<>]*)")


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every configured secret value replaced (any length, longest first, also in its URL-encoded
    and JSON-escaped spellings) and every URL credential in it redacted."""
    for variant in _variants(secrets):
        text = text.replace(variant, REDACTED)
    return _redact_urls_in_text(text)


def redact_url(url: str) -> str:
    """The URL without embedded credentials: `user:pass@` becomes `[redacted]@`, and the value of every
    credential-named query (or fragment) parameter becomes `[redacted]`, its name kept."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return _redact_urls_in_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    return urlunsplit((parts.scheme, netloc, parts.path, _redact_pairs(parts.query), _redact_pairs(parts.fragment)))


def url_secrets(url: str | None) -> list[str]:
    """The credentials a URL carries: the password of `user:pass@` (or the user part when it has no password:
    then it is the token), and the values of credential-named query and fragment parameters; raw and decoded."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found: list[str] = []
    if "@" in parts.netloc:
        userinfo = parts.netloc.rpartition("@")[0]
        user, colon, password = userinfo.partition(":")
        found += [password] if colon else [user]
    for section in (parts.query, parts.fragment):
        found += [m["value"] for m in _QUERY_PAIR.finditer("?" + section) if secret_name(m["name"])]
    return _unique(value for raw in found if raw for value in (raw, unquote(raw)))


def secret_values(*, api_key_env: str | None = None, base_url: str | None = None, default_key_envs: bool = False,
                  environ: Mapping[str, str] = os.environ) -> list[str]:
    """Every secret value an arm configures: its key variable's value (or, for an arm that names none but reads
    DEFAULT_KEY_ENVS, every one of those that is set) and the credentials in its base URL."""
    names = [api_key_env] if api_key_env else list(DEFAULT_KEY_ENVS) if default_key_envs else []
    values = [environ.get(name, "").strip() for name in names]
    return _unique([v for v in values if v] + url_secrets(base_url))


def arm_secrets(arm: Any, environ: Mapping[str, str] = os.environ) -> list[str]:
    """`secret_values` of a run-spec arm (any object with `adapter`, `base_url` and maybe `api_key_env`)."""
    api_key_env = getattr(arm, "api_key_env", None)
    return secret_values(api_key_env=api_key_env, base_url=getattr(arm, "base_url", None),
                         default_key_envs=getattr(arm, "adapter", None) == "router" and not api_key_env,
                         environ=environ)


def redact_values(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like value (a server's self-description) where the value of every credential-named key
    and every credential-shaped string is `[redacted]`, URLs lose their credentials and configured secrets are
    scrubbed. Names are judged by whole words: `api_key`, `admin_api_key`, `hf_token` go; `max_total_tokens`,
    `max_prefill_tokens`, `tokenizer_path`, `token_capacity`, `eos_token` stay."""
    secrets = list(secrets)
    if isinstance(value, Mapping):
        return {k: REDACTED if secret_name(str(k)) and v not in (None, "", [], {}) and not names_env(str(k), v)
                else redact_values(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(v, secrets) for v in value]
    if isinstance(value, str):
        return REDACTED if _CREDENTIAL_VALUE.search(value) else scrub(value, secrets)
    return value


def secret_name(name: str) -> bool:
    """Whether a key or parameter name names a credential (api_key, Authorization, x-api-key, hf_token, sig...)."""
    words = _words(name)
    if not words:
        return False
    if set(words) in _ALONE or _SECRET_WORDS.intersection(words):
        return True
    pairs = list(zip(words, words[1:]))
    return any(pair in _SECRET_PAIRS or (pair[1] == "token" and pair[0] in _TOKEN_OWNERS)
               or (pair[0] in {"api", "x"} and pair[1] == "key") for pair in pairs)


def scrub_error(error: AdapterError, secrets: Iterable[str]) -> AdapterError:
    """The same error with its message and every attempt's error text scrubbed (the attempts are kept)."""
    secrets = list(secrets)
    scrub_attempts(error.attempts, secrets)
    cleaned = AdapterError(error.kind, scrub(str(error), secrets), error.attempts)
    cleaned.__traceback__ = error.__traceback__
    return cleaned


def scrub_attempts(attempts: list[CallAttempt], secrets: Iterable[str]) -> None:
    secrets = list(secrets)
    for attempt in attempts:
        if attempt.error:
            attempt.error = scrub(attempt.error, secrets)


def scrub_start(start: ArmStart, secrets: Iterable[str]) -> ArmStart:
    """An arm's start record as it may be stored: endpoint without credentials, warnings scrubbed, and the
    server's and model's self-descriptions and the recorded config redacted by `redact_values`."""
    secrets = list(secrets)
    return start.model_copy(update={
        "endpoint": redact_url(scrub(start.endpoint, secrets)),
        "served_model": scrub(start.served_model, secrets) if start.served_model else start.served_model,
        "server_info": redact_values(start.server_info, secrets) if start.server_info is not None else None,
        "model_info": redact_values(start.model_info, secrets) if start.model_info is not None else None,
        "config": redact_values(start.config, secrets),
        "warnings": [scrub(w, secrets) for w in start.warnings]})


def _variants(secrets: Iterable[str]) -> list[str]:
    """Each secret as written, URL-encoded and JSON-escaped (a server may echo any of them), longest first so a
    secret that contains another is replaced whole."""
    variants = set()
    for secret in secrets:
        if not secret:
            continue
        variants.update({secret, quote(secret, safe=""), json.dumps(secret)[1:-1]})
    return sorted(variants, key=len, reverse=True)


def _redact_urls_in_text(text: str) -> str:
    text = _BEARER.sub(lambda m: f"{m['scheme']} {REDACTED}", text)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    return _QUERY_PAIR.sub(lambda m: f"{m['lead']}{m['name']}={REDACTED}" if secret_name(m["name"]) and m["value"]
                           else m[0], text)


def _redact_pairs(section: str) -> str:
    if not section:
        return section
    redacted = _QUERY_PAIR.sub(lambda m: f"{m['lead']}{m['name']}={REDACTED}" if secret_name(m["name"])
                               and m["value"] else m[0], "?" + section)
    return redacted[1:]


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def names_env(name: str, value: Any) -> bool:
    """`api_key_env: ROUTER_API_KEY` (or null) names where a secret lives, not the secret."""
    words = _words(name)
    return bool(words) and words[-1] in {"env", "var"} and (value is None or isinstance(value, str)
                                                            and re.fullmatch(r"[A-Z_][A-Z0-9_]*", value) is not None)


def credential_shaped(text: str) -> bool:
    """Whether a string looks like a credential whatever its name (a bearer header, an sk-/hf_/ghp_ key)."""
    return _CREDENTIAL_VALUE.search(text) is not None


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
