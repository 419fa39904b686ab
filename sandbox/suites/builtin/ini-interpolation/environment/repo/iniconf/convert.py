"""Conversion of expanded string values to Python types (bool, int, float, list, duration, size)."""

import re

from .errors import ConfigError

TRUE_WORDS = frozenset({"1", "yes", "true", "on", "enabled"})
FALSE_WORDS = frozenset({"0", "no", "false", "off", "disabled"})

_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2,
               "g": 1024**3, "gb": 1024**3, "t": 1024**4, "tb": 1024**4}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


class ConversionError(ConfigError, ValueError):
    def __init__(self, value, kind):
        self.value = value
        self.kind = kind
        super().__init__(f"cannot convert {value!r} to {kind}")


def to_bool(value):
    word = value.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ConversionError(value, "bool")


def to_int(value):
    text = value.strip().replace("_", "")
    try:
        return int(text, 0)
    except ValueError:
        raise ConversionError(value, "int") from None


def to_float(value):
    try:
        return float(value.strip().replace("_", ""))
    except ValueError:
        raise ConversionError(value, "float") from None


def to_list(value, separator=","):
    """Split on the separator and on newlines; surrounding blanks and empty items are dropped."""
    items = []
    for line in value.splitlines():
        items.extend(part.strip() for part in line.split(separator))
    return [item for item in items if item]


def to_duration(value):
    """Seconds (float) from '90', '1.5s', '250ms', '1h30m', '2d 4h'."""
    text = value.strip().lower()
    if not text:
        raise ConversionError(value, "duration")
    try:
        return float(text)
    except ValueError:
        pass
    total = 0.0
    position = 0
    for match in _DURATION_PART.finditer(text):
        if text[position:match.start()].strip():
            raise ConversionError(value, "duration")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        position = match.end()
    if position == 0 or text[position:].strip():
        raise ConversionError(value, "duration")
    return total


def to_size(value):
    """Bytes (int) from '512', '64k', '10MB', '1.5G' (binary multiples)."""
    match = _SIZE.fullmatch(value.strip().lower())
    if not match or match.group(2) not in _SIZE_UNITS:
        raise ConversionError(value, "size")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2)])


CONVERTERS = {
    "bool": to_bool,
    "int": to_int,
    "float": to_float,
    "list": to_list,
    "duration": to_duration,
    "size": to_size,
}
