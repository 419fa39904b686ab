"""`leafcost mine` on real public repositories (issue 24's proof; not part of CI): per repository, one `leafcost mine`
command, then `leafcost validate` on what it kept; the yield per 100 commits scanned, the time per candidate with and
without its image builds, and how many kept tasks validate.

Run from the repository root, with each repository a local clone or bare mirror (e.g. from the `fetch` tool):

    .venv/bin/python bench/mine_real_repos.py REPO_DIR[=OWNER/NAME] ... --out /tmp/mined [--since 2023-01-01]
        [--limit 20] [--env-hint hint.yaml] [--ca-bundle /etc/ssl/certs/ca-certificates.crt] [--reuse] [--json]

`--reuse` reads earlier results in --out instead of mining again (the validation runs again only when its result
is missing). "Commits scanned" counts the commits in the date range from the newest down to the oldest candidate
looked at (with --limit the scan stops there, so older commits are not counted). The machine's load average is
recorded before and after each repository.

`--quick` (no repositories named) checks that the bench runs: it builds a tiny local git repository (a package, a
bug fix with its test, a README change) in a temporary folder and mines it with one test run before and after
(`--runs 1`), on the test suite's stand-in for the Python base image (tests/container_images.py: built from
Debian's packages if missing, never pulled), with no network. Not a measurement."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

LEAFCOST = Path(sys.executable).with_name("leafcost")
ROOT = Path(__file__).resolve().parent.parent
QUICK_NAME, QUICK_RUNS = "local/slugkit", 1


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def mine(repo: Path, name: str, out: Path, args: argparse.Namespace) -> dict:
    """Runs (or with --reuse reads) one repository's mining and validation; returns its figures."""
    started_load = _load()
    seconds = None
    if not (args.reuse and (out / "report.json").is_file()):
        command = [str(LEAFCOST), "mine", str(repo), "--out", str(out), "--repo-name", name, "--json"]
        command += ["--since", args.since] if args.since else []
        command += ["--limit", str(args.limit)] if args.limit else []
        command += ["--env-hint", str(args.env_hint)] if args.env_hint else []
        command += ["--ca-bundle", str(args.ca_bundle)] if args.ca_bundle else []
        command += ["--runs", str(args.runs)] if args.runs else []
        begun = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - begun
        if not (out / "report.json").is_file():
            raise SystemExit(f"leafcost mine {repo} wrote no report (exit {done.returncode}): {done.stderr[-2000:]}")
    report = json.loads((out / "report.json").read_text())
    validation = out / "validate.json"
    if not (args.reuse and validation.is_file()) and (out / "tasks.jsonl").read_text().strip():
        done = subprocess.run([str(LEAFCOST), "validate", str(out / "tasks.jsonl"), "--backend", "podman", "--json",
                               "--workers", "2"], capture_output=True, text=True, check=False)
        validation.write_text(done.stdout or json.dumps({"valid": 0, "invalid": 0, "tasks": []}))
    validated = json.loads(validation.read_text()) if validation.is_file() else {"valid": 0, "invalid": 0}
    return figures(repo, name, report, validated, seconds, started_load)


def figures(repo: Path, name: str, report: dict, validated: dict, seconds: float | None, load: str) -> dict:
    results = report["candidates"]
    built = [r for r in results if r.get("built")]
    kept = [r for r in results if r["kept"]]
    scanned = commits_scanned(repo, report)
    testing = [r["seconds"] - r.get("build_seconds", 0.0) for r in built]
    builds = [r.get("build_seconds", 0.0) for r in built]
    dropped: dict[str, int] = dict(report.get("scan_dropped", {}))
    for r in results:
        if not r["kept"]:
            dropped[r["reason"]] = dropped.get(r["reason"], 0) + 1
    return {
        "repository": name, "head": report.get("head"), "commits_scanned": scanned,
        "candidates_looked_at": len(results), "built": len(built), "kept": len(kept),
        "validated": validated.get("valid", 0), "invalid": validated.get("invalid", 0),
        "kept_per_100_commits": round(100 * len(kept) / scanned, 2) if scanned else None,
        "candidate_seconds_excluding_builds": _spread(testing), "build_seconds": _spread(builds),
        "mining_seconds": round(seconds, 1) if seconds is not None else report.get("seconds"),
        "dropped": dropped, "limit_reached": report.get("limit_reached"), "load_before": load,
        "load_after": _load(), "error": report.get("error"),
    }


def commits_scanned(repo: Path, report: dict) -> int:
    """Commits from the scan's head down to the oldest candidate looked at, within the report's --since."""
    candidates = report["candidates"]
    if not report.get("limit_reached") or not candidates:
        return report["commits_seen"]
    oldest = min(datetime.fromisoformat(c["committed_at"].replace("Z", "+00:00")) for c in candidates)
    counted = subprocess.run(["git", "-C", str(repo), "rev-list", "--count", f"--since={oldest.isoformat()}",
                              report["head"]], capture_output=True, text=True, check=True)
    return int(counted.stdout.strip())


def _spread(values: list[float]) -> dict | None:
    if not values:
        return None
    return {"median": round(statistics.median(values), 1), "min": round(min(values), 1),
            "max": round(max(values), 1), "n": len(values)}


def quick_repository(folder: Path) -> Path:
    """A tiny Python project's history, oldest first: the package with a first test (the root: no parent to mine
    against), a bug fix with the test it makes pass (the candidate to keep), a README (no tests: dropped)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.git_repos import CommitSpec, make_repo

    pyproject = ('[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
                 '[project]\nname = "slugkit"\nversion = "0.1"\nrequires-python = ">=3.9"\n\n'
                 '[tool.setuptools]\npackages = ["slugkit"]\n')
    first_test = "from slugkit import slugify\n\n\ndef test_lowercase():\n    assert slugify('Ab') == 'ab'\n"
    return make_repo(folder / "slugkit", [
        CommitSpec({"pyproject.toml": pyproject, "tests/test_slug.py": first_test,
                    "slugkit/__init__.py": "def slugify(text):\n    return text.lower().replace(' ', '-')\n"},
                   "Start slugkit with slugify and a first test", "2023-02-01T10:00:00Z"),
        CommitSpec({"slugkit/__init__.py": "def slugify(text):\n    return '-'.join(text.lower().split())\n",
                    "tests/test_slug.py": first_test + "\n\ndef test_collapses_spaces():\n"
                                                       "    assert slugify('a  b') == 'a-b'\n"},
                   "slugify leaves repeated dashes for repeated spaces\n\nslugify('a  b') gives 'a--b' where one "
                   "dash is expected.\n", "2023-02-02T10:00:00Z"),
        CommitSpec({"README.md": "slugkit makes slugs.\n"}, "Describe slugkit in a README for new users",
                   "2023-02-03T10:00:00Z"),
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repos", nargs="*", help="REPO_DIR or REPO_DIR=OWNER/NAME")
    parser.add_argument("--out", type=Path, help="required unless --quick (then a temporary folder by default)")
    parser.add_argument("--since")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--env-hint", type=Path)
    parser.add_argument("--ca-bundle", type=Path)
    parser.add_argument("--runs", type=int, help="leafcost mine's --runs (default: its own)")
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="mine a tiny local repository this builds (no network), one test run each: a check "
                             "that the bench runs, not a measurement")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.quick == bool(args.repos):
        parser.error("name the repositories to mine, or --quick (which builds its own) without any")
    if not args.quick and args.out is None:
        parser.error("--out is required (except with --quick)")
    with tempfile.TemporaryDirectory(prefix="leafcost-mine-bench-") as scratch:
        if args.quick:
            sys.path.insert(0, str(ROOT / "tests"))
            from container_images import ensure_mining_base_image

            ensure_mining_base_image()
            args.runs = args.runs or QUICK_RUNS
            args.out = args.out or Path(scratch) / "out"
            args.repos = [f"{quick_repository(Path(scratch))}={QUICK_NAME}"]
        rows = []
        for item in args.repos:
            path, _, name = item.partition("=")
            name = name or f"local/{Path(path).name}"
            rows.append(mine(Path(path), name, args.out / name.replace("/", "__"), args))
    document = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "since": args.since,
                "limit": args.limit, "runs": args.runs, "quick": args.quick, "repositories": rows,
                "validated_total": sum(r["validated"] for r in rows)}
    if args.json:
        print(json.dumps(document, indent=2))
        return
    print(f"{document['date']}: since {args.since}, limit {args.limit}"
          + ("; --quick: a check that the bench runs, not a measurement" if args.quick else ""))
    print("| repository | commits scanned | candidates looked at | built | kept | validated | kept per 100 commits "
          "| s per candidate excl. builds (median [min, max]) | build s (median [max]) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    for r in rows:
        t, b = r["candidate_seconds_excluding_builds"] or {}, r["build_seconds"] or {}
        print(f"| {r['repository']} | {r['commits_scanned']} | {r['candidates_looked_at']} | {r['built']} | "
              f"{r['kept']} | {r['validated']} | {r['kept_per_100_commits']} | "
              f"{t.get('median')} [{t.get('min')}, {t.get('max')}] | {b.get('median')} [{b.get('max')}] |")
    print(f"validated in all: {document['validated_total']}")
    for r in rows:
        print(f"{r['repository']}: dropped {r['dropped']}; load {r['load_before']} → {r['load_after']}"
              + (f"; stopped: {r['error']}" if r["error"] else ""))


if __name__ == "__main__":
    main()
