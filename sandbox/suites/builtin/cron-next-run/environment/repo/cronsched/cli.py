"""Command line: `python -m cronsched EXPR [--after ISO] [-n COUNT]` prints upcoming runs."""

import argparse
import datetime as dt
import itertools
import sys

from .errors import CronError
from .expression import CronExpression
from .schedule import iter_runs


def build_parser():
    parser = argparse.ArgumentParser(prog="cronsched", description=__doc__)
    parser.add_argument("expression", help="cron expression, quoted (e.g. '*/15 9-17 * * MON-FRI')")
    parser.add_argument("--after", help="start time, ISO 8601 (default: now)")
    parser.add_argument("-n", "--count", type=int, default=5, help="number of runs to print")
    parser.add_argument("--check", action="store_true", help="only validate the expression")
    return parser


def main(argv=None, out=sys.stdout):
    args = build_parser().parse_args(argv)
    try:
        expr = CronExpression.parse(args.expression)
        if args.check:
            print(f"ok: {expr}", file=out)
            return 0
        after = dt.datetime.fromisoformat(args.after) if args.after else dt.datetime.now()
        for moment in itertools.islice(iter_runs(expr, after), max(args.count, 0)):
            print(moment.strftime("%Y-%m-%d %H:%M %a"), file=out)
    except (CronError, ValueError) as exc:
        print(f"cronsched: error: {exc}", file=sys.stderr)
        return 2
    return 0
