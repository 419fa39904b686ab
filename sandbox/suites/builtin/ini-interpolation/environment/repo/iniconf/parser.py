"""Turns INI text into a Document: ordered sections of raw (uninterpolated) string values.

Syntax: `[section]` headers, `key = value` or `key: value` pairs, full-line comments starting
with `#` or `;`, and continuation lines (indented lines extend the previous value, joined by
newlines). Keys are case-insensitive and stored lower-case; section names keep their case.
Pairs before the first header, and pairs in `[DEFAULT]`, go to the defaults.
"""

from dataclasses import dataclass, field

from .errors import DuplicateKeyError, ParseError

DEFAULT_SECTION = "DEFAULT"
COMMENT_PREFIXES = ("#", ";")


@dataclass
class Document:
    """Raw values of one or more parsed files; later files override earlier ones."""

    defaults: dict = field(default_factory=dict)
    sections: dict = field(default_factory=dict)

    def section_names(self):
        return list(self.sections)

    def raw_get(self, section, key):
        """Raw value of key in section, falling back to the defaults; None if absent."""
        key = normalize_key(key)
        if section != DEFAULT_SECTION:
            values = self.sections.get(section)
            if values is not None and key in values:
                return values[key]
        return self.defaults.get(key)

    def merge(self, other):
        """Overlay another document on this one (its values win)."""
        self.defaults.update(other.defaults)
        for name, values in other.sections.items():
            self.sections.setdefault(name, {}).update(values)
        return self


def normalize_key(key):
    return key.strip().lower()


def parse(text, source="<string>"):
    """Parse INI text into a Document. Raises ParseError with the line number on bad input."""
    doc = Document()
    current = doc.defaults
    current_name = DEFAULT_SECTION
    last_key = None
    seen = {DEFAULT_SECTION: set()}

    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith(COMMENT_PREFIXES):
            if not stripped:
                last_key = None
            continue

        if line[0] in " \t" and last_key is not None:
            current[last_key] = _join_continuation(current[last_key], stripped)
            continue

        if stripped.startswith("["):
            current_name = _section_name(stripped, source, lineno)
            if current_name == DEFAULT_SECTION:
                current = doc.defaults
            else:
                current = doc.sections.setdefault(current_name, {})
            seen.setdefault(current_name, set())
            last_key = None
            continue

        key, value = _split_pair(stripped, source, lineno)
        if key in seen[current_name]:
            raise DuplicateKeyError(
                f"duplicate key {key!r} in section [{current_name}]", source, lineno
            )
        seen[current_name].add(key)
        current[key] = value
        last_key = key

    return doc


def _section_name(stripped, source, lineno):
    if not stripped.endswith("]"):
        raise ParseError(f"unterminated section header {stripped!r}", source, lineno)
    name = stripped[1:-1].strip()
    if not name:
        raise ParseError("empty section name", source, lineno)
    return name


def _split_pair(stripped, source, lineno):
    positions = [p for p in (stripped.find("="), stripped.find(":")) if p > 0]
    if not positions:
        raise ParseError(f"expected 'key = value', got {stripped!r}", source, lineno)
    cut = min(positions)
    key = normalize_key(stripped[:cut])
    if not key:
        raise ParseError("empty key", source, lineno)
    return key, stripped[cut + 1:].strip()


def _join_continuation(previous, addition):
    return addition if previous == "" else previous + "\n" + addition
