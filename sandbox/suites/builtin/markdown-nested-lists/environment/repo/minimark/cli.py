"""``python -m minimark [FILE]``: convert Markdown from a file or stdin.

  -o, --output FILE   write the HTML there instead of stdout
  --heading-ids       give headings id attributes
  --title TITLE       emit a complete HTML document with this title
"""

import argparse
import sys
from typing import List, Optional

from .blocks import parse_blocks
from .render import render_html


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="minimark", description="Convert Markdown to HTML.")
    parser.add_argument("file", nargs="?", help="Markdown file (default: stdin)")
    parser.add_argument("-o", "--output", help="output file (default: stdout)")
    parser.add_argument("--heading-ids", action="store_true", help="add id attributes to headings")
    parser.add_argument("--title", help="wrap the output in a complete HTML document")
    args = parser.parse_args(argv)
    try:
        if args.file and args.file != "-":
            with open(args.file, encoding="utf-8") as fh:
                source = fh.read()
        else:
            source = sys.stdin.read()
    except OSError as exc:
        print(f"minimark: {exc}", file=sys.stderr)
        return 1
    html = render_html(parse_blocks(source), heading_ids=args.heading_ids, title=args.title)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(html)
    else:
        sys.stdout.write(html)
    return 0
