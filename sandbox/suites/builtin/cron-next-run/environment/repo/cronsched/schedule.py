"""Finding the minutes at which an expression fires.

Times are handled as wall-clock values: the tzinfo of the starting datetime (if any) is
carried over to the results, without DST adjustment.
"""

import calendar
import datetime as dt

from .errors import NoRunError
from .expression import CronExpression

MAX_YEARS = 30


def next_run(expression, after):
    """The first minute strictly after `after` at which the expression fires."""
    expr = _as_expression(expression)
    start = after.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    start_day = start.date()

    year, month = start.year, start.month
    for _ in range(MAX_YEARS * 12):
        if month in expr.month:
            for day in _candidate_days(expr, year, month):
                date = dt.date(year, month, day)
                if date < start_day:
                    continue
                found = _first_time(expr, start if date == start_day else None)
                if found is not None:
                    hour, minute = found
                    return dt.datetime(year, month, day, hour, minute, tzinfo=after.tzinfo)
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    raise NoRunError(f"{expr.source!r} does not fire within {MAX_YEARS} years of {after}")


def iter_runs(expression, after):
    """Endless iterator over the run times after `after`."""
    expr = _as_expression(expression)
    current = after
    while True:
        current = next_run(expr, current)
        yield current


def runs_between(expression, start, end, limit=10000):
    """Run times t with start < t <= end (at most `limit` of them)."""
    runs = []
    for moment in iter_runs(expression, start):
        if moment > end or len(runs) >= limit:
            break
        runs.append(moment)
    return runs


def _as_expression(expression):
    if isinstance(expression, CronExpression):
        return expression
    return CronExpression.parse(expression)


def _candidate_days(expr, year, month):
    """Days of the month on which the expression may fire, in order."""
    first_weekday, length = calendar.monthrange(year, month)
    days = []
    for day in expr.day_of_month.ordered():
        if day > length:
            break
        weekday = (first_weekday + day) % 7
        if weekday in expr.day_of_week:
            days.append(day)
    return days


def _first_time(expr, not_before):
    """(hour, minute) of the first firing on a matching day, not before `not_before`'s time."""
    min_hour = not_before.hour if not_before else 0
    for hour in expr.hour.ordered():
        if hour < min_hour:
            continue
        min_minute = not_before.minute if not_before and hour == not_before.hour else 0
        minute = expr.minute.first_at_or_after(min_minute)
        if minute is not None:
            return hour, minute
    return None

