"""cronsched: parse five-field cron expressions and compute when they fire next."""

from .errors import CronError, CronSyntaxError, NoRunError
from .expression import CronExpression
from .schedule import iter_runs, next_run, runs_between

__all__ = [
    "CronError",
    "CronExpression",
    "CronSyntaxError",
    "NoRunError",
    "iter_runs",
    "next_run",
    "runs_between",
]

__version__ = "1.2.0"
