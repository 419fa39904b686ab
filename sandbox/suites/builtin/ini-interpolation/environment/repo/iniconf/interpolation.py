"""Expansion of ${...} references inside raw values.

`${key}` refers to another key of the same section (or of the defaults), `${section:key}`
to a key of another section. A literal dollar sign is written `$$`. Referenced values are
expanded recursively, up to MAX_DEPTH levels; a reference cycle is reported as an error.
"""

import re

from .errors import InterpolationDepthError, MissingReferenceError

MAX_DEPTH = 10

_REFERENCE = re.compile(r"\$\{([^{}]*)\}")


class Interpolator:
    """Expands references using `lookup(section, key)`, which returns a raw value or None."""

    def __init__(self, lookup, max_depth=MAX_DEPTH):
        self._lookup = lookup
        self.max_depth = max_depth

    def expand(self, section, key, raw):
        """Fully expanded form of `raw`, the value of `key` in `section`."""
        return self._expand(section, raw, [(section, key)])

    def _expand(self, section, raw, chain):
        if "$" not in raw:
            return raw

        def substitute(match):
            reference = match.group(1).strip()
            target = _resolve_target(reference, section)
            if target in chain or len(chain) >= self.max_depth:
                raise InterpolationDepthError(chain[0][0], chain[0][1], chain + [target])
            value = self._lookup(*target)
            if value is None:
                raise MissingReferenceError(chain[-1][0], chain[-1][1], reference)
            return self._expand(target[0], value, chain + [target])

        expanded = _REFERENCE.sub(substitute, raw)
        return expanded.replace("$$", "$")


def _resolve_target(reference, section):
    if ":" in reference:
        target_section, _, key = reference.partition(":")
        return target_section.strip(), key.strip().lower()
    return section, reference.lower()
