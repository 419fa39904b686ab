"""Command line.

    python3 -m linediff diff OLD NEW [-U N] [--label-old L] [--label-new L]
        prints a unified diff; exit status 0 if the files are identical, 1 if they differ
    python3 -m linediff apply PATCH TARGET [-o OUTPUT] [--check]
        applies a single-file unified diff to TARGET (in place unless -o is given)

Errors exit with status 2.
"""

import argparse
import sys

from .hunks import DEFAULT_CONTEXT
from .patch import PatchError, apply_patch
from .unified import unified_diff


def build_parser():
    parser = argparse.ArgumentParser(prog="linediff")
    commands = parser.add_subparsers(dest="command", required=True)

    diff = commands.add_parser("diff", help="compare two files")
    diff.add_argument("old")
    diff.add_argument("new")
    diff.add_argument("-U", "--unified", type=int, default=DEFAULT_CONTEXT, metavar="N",
                      help=f"lines of context (default {DEFAULT_CONTEXT})")
    diff.add_argument("--label-old")
    diff.add_argument("--label-new")

    apply = commands.add_parser("apply", help="apply a unified diff to a file")
    apply.add_argument("patch")
    apply.add_argument("target")
    apply.add_argument("-o", "--output", help="write the result here instead of TARGET")
    apply.add_argument("--check", action="store_true", help="only check that it applies")
    return parser


def main(argv=None, stdout=None):
    stdout = stdout or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command == "diff":
            return _diff(args, stdout)
        return _apply(args, stdout)
    except (OSError, PatchError, ValueError) as exc:
        print(f"linediff: {exc}", file=sys.stderr)
        return 2


def _diff(args, stdout):
    old, new = _read(args.old), _read(args.new)
    text = unified_diff(old, new, args.label_old or args.old, args.label_new or args.new,
                        context=args.unified)
    stdout.write(text)
    return 1 if text else 0


def _apply(args, stdout):
    result = apply_patch(_read(args.target), _read(args.patch))
    if args.check:
        stdout.write(f"{args.target}: patch applies cleanly\n")
        return 0
    with open(args.output or args.target, "w", encoding="utf-8", newline="") as handle:
        handle.write(result)
    return 0


def _read(path):
    with open(path, encoding="utf-8", newline="") as handle:
        return handle.read()
