"""Parsing the fixed-offset time zones used for reports and naive input.

Only fixed UTC offsets are supported (``UTC``, ``Z``, ``+02:00``, ``-0530``,
``+5``): sales exports carry offsets, not zone names, and a report needs a
single, unambiguous offset to cut days at.
"""

import re
from datetime import timedelta, timezone

_OFFSET = re.compile(r"^(?:UTC)?([+-])(\d{1,2})(?::?(\d{2}))?$")


def parse_tz(text: str) -> timezone:
    """Turn ``'UTC'``, ``'Z'`` or an offset like ``'+02:00'`` into a timezone."""
    value = text.strip().upper()
    if value in ("UTC", "Z", "GMT"):
        return timezone.utc
    match = _OFFSET.match(value)
    if not match:
        raise ValueError(f"unsupported time zone {text!r}: use UTC or an offset like +02:00")
    sign, hours, minutes = match.group(1), int(match.group(2)), int(match.group(3) or 0)
    if hours > 14 or minutes >= 60:
        raise ValueError(f"UTC offset out of range: {text!r}")
    delta = timedelta(hours=hours, minutes=minutes)
    if delta == timedelta(0):
        return timezone.utc
    return timezone(-delta if sign == "-" else delta)


def format_tz(tz: timezone) -> str:
    """The inverse of :func:`parse_tz` for display (``UTC`` or ``+02:00``)."""
    offset = tz.utcoffset(None)
    if not offset:
        return "UTC"
    sign = "-" if offset < timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
