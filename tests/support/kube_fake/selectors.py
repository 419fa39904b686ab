"""Label and field selectors as the API server parses them from `labelSelector=` and `fieldSelector=`, and the
`matchLabels`/`matchExpressions` form a NetworkPolicy's podSelector uses.

Label selectors: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (absent), comma-joined.
Field selectors: `path=v`, `path==v`, `path!=v` on a dotted path (`metadata.name`, `status.phase`, `spec.nodeName`).
A malformed selector raises ValueError, which the server answers with 400 as a real one does.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["field_selector", "label_selector", "match_pod_selector"]

Predicate = Callable[[Mapping[str, Any]], bool]
_SET_TERM = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQUALITY_TERM = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)\s*$")


def label_selector(text: str | None) -> Predicate:
    """A predicate over an object's `metadata.labels`; an empty selector matches everything."""
    terms = [_label_term(term) for term in _split_terms(text or "")]
    return lambda obj: all(term((obj.get("metadata") or {}).get("labels") or {}) for term in terms)


def field_selector(text: str | None) -> Predicate:
    """A predicate over an object's fields; an empty selector matches everything."""
    terms = []
    for term in _split_terms(text or ""):
        found = _EQUALITY_TERM.match(term)
        if found is None:
            raise ValueError(f"invalid field selector term {term!r}")
        path, operator, value = found.groups()
        terms.append((path.split("."), operator == "!=", value))

    def check(obj: Mapping[str, Any]) -> bool:
        return all((_field(obj, path) != value) if negated else (_field(obj, path) == value)
                   for path, negated, value in terms)

    return check


def match_pod_selector(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelector object (`matchLabels`, `matchExpressions`) against a pod's labels; `{}` selects all."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def _split_terms(text: str) -> list[str]:
    """Commas separate terms except inside `in (a,b)` lists."""
    terms, depth, current = [], 0, []
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(char)
    terms.append("".join(current))
    return [term for term in terms if term.strip()]


def _label_term(term: str) -> Callable[[Mapping[str, str]], bool]:
    equality = _EQUALITY_TERM.match(term)
    if equality is not None:
        key, operator, value = equality.groups()
        if operator == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    found = _SET_TERM.match(term)
    if found is None:
        raise ValueError(f"invalid label selector term {term!r}")
    negated, key, operator, listed = found.groups()
    if negated and operator:
        raise ValueError(f"invalid label selector term {term!r}")
    if negated:
        return lambda labels: key not in labels
    if operator is None:
        return lambda labels: key in labels
    values = {value.strip() for value in listed.split(",") if value.strip()}
    if operator == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: key not in labels or labels[key] not in values


def _field(obj: Mapping[str, Any], path: list[str]) -> str:
    """A field's value as a selector compares it: missing fields compare as the empty string."""
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)
