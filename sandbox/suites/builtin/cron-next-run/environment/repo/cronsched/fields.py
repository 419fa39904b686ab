"""Parsing of a single cron field (`*`, `5`, `1-5`, `*/15`, `10-50/20`, `MON-FRI`, lists).

A field becomes a Field: the set of values it allows, plus the text it was parsed from.
Day-of-week uses 0-6 with 0 = Sunday; 7 is accepted as another spelling of Sunday.
"""

from dataclasses import dataclass, field

from .errors import CronSyntaxError

_MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun",
                "jul", "aug", "sep", "oct", "nov", "dec"]
_WEEKDAY_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]


@dataclass(frozen=True)
class FieldSpec:
    name: str
    low: int
    high: int
    names: dict = field(default_factory=dict)


MINUTE = FieldSpec("minute", 0, 59)
HOUR = FieldSpec("hour", 0, 23)
DAY_OF_MONTH = FieldSpec("day-of-month", 1, 31)
MONTH = FieldSpec("month", 1, 12, {n: i for i, n in enumerate(_MONTH_NAMES, start=1)})
DAY_OF_WEEK = FieldSpec("day-of-week", 0, 7, {n: i for i, n in enumerate(_WEEKDAY_NAMES)})

SPECS = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)


@dataclass(frozen=True)
class Field:
    spec: FieldSpec
    values: frozenset
    text: str

    def __contains__(self, value):
        return value in self.values

    def ordered(self):
        return sorted(self.values)

    def first_at_or_after(self, value):
        """Smallest allowed value >= value, or None."""
        for candidate in self.ordered():
            if candidate >= value:
                return candidate
        return None

    def __str__(self):
        return self.text


def parse_field(text, spec):
    """Parse the text of one field according to spec; raises CronSyntaxError."""
    text = text.strip()
    if not text:
        raise CronSyntaxError("empty field", spec.name, text)
    values = set()
    for part in text.split(","):
        values |= _parse_part(part, spec, text)
    if spec is DAY_OF_WEEK and 7 in values:
        values.discard(7)
        values.add(0)
    return Field(spec, frozenset(values), text)


def _parse_part(part, spec, whole):
    base, slash, step_text = part.partition("/")
    step = 1
    if slash:
        step = _number(step_text, spec, whole)
        if step < 1:
            raise CronSyntaxError("step must be at least 1", spec.name, whole)

    if base == "*":
        low, high = spec.low, spec.high
    elif "-" in base:
        first, _, last = base.partition("-")
        low, high = _value(first, spec, whole), _value(last, spec, whole)
        if low > high:
            raise CronSyntaxError(f"range {base!r} is reversed", spec.name, whole)
    else:
        low = _value(base, spec, whole)
        high = spec.high if slash else low
    return set(range(low, high + 1, step))


def _value(token, spec, whole):
    token = token.strip().lower()
    if token in spec.names:
        return spec.names[token]
    number = _number(token, spec, whole)
    if not spec.low <= number <= spec.high:
        raise CronSyntaxError(
            f"{number} is outside {spec.low}-{spec.high}", spec.name, whole
        )
    return number


def _number(token, spec, whole):
    if not token.isdigit():
        raise CronSyntaxError(f"{token!r} is not a number", spec.name, whole)
    return int(token)
