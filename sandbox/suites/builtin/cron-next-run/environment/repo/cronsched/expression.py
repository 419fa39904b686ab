"""CronExpression: five parsed fields (minute hour day-of-month month day-of-week).

Also accepts the usual macros (@hourly, @daily, @weekly, @monthly, @yearly and aliases).
"""

from dataclasses import dataclass

from .errors import CronSyntaxError
from .fields import DAY_OF_MONTH, DAY_OF_WEEK, HOUR, MINUTE, MONTH, Field, parse_field

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def cron_weekday(day):
    """Cron's day-of-week number (0 = Sunday) of a date or datetime."""
    return (day.weekday() + 1) % 7


@dataclass(frozen=True)
class CronExpression:
    minute: Field
    hour: Field
    day_of_month: Field
    month: Field
    day_of_week: Field
    source: str

    @classmethod
    def parse(cls, text):
        source = text.strip()
        expanded = MACROS.get(source.lower(), source)
        if expanded.startswith("@"):
            raise CronSyntaxError(f"unknown macro {source!r}")
        parts = expanded.split()
        if len(parts) != 5:
            raise CronSyntaxError(f"expected 5 fields, got {len(parts)} in {source!r}")
        specs = (MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK)
        fields = [parse_field(part, spec) for part, spec in zip(parts, specs)]
        return cls(*fields, source=source)

    def day_matches(self, day):
        """Whether the expression may fire on this calendar day."""
        return day.day in self.day_of_month and cron_weekday(day) in self.day_of_week

    def matches(self, moment):
        """Whether the expression fires at this minute."""
        return (
            moment.minute in self.minute
            and moment.hour in self.hour
            and moment.month in self.month
            and self.day_matches(moment)
        )

    def fields(self):
        return (self.minute, self.hour, self.day_of_month, self.month, self.day_of_week)

    def __str__(self):
        return " ".join(str(f) for f in self.fields())
