"""The one trivial Harbor task the harness benchmarks run (nothing to do; the grader writes reward 0), as a suite
written into a scratch directory."""

from __future__ import annotations

from pathlib import Path

TASK_FILES = {
    "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[environment]\nmemory_mb = 512\n'
                 'allow_internet = false\n',
    "instruction.md": "# Nothing to do\nThis task exists to measure the harness.\n",
    "environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY repo/ /app/\n",
    "environment/repo/README.md": "a trivial repository\n",
    "tests/test.sh": "echo 0 > /logs/verifier/reward.txt\n",
    "solution/solve.sh": "true\n",
}


def make_suite(root: Path) -> Path:
    """Writes the suite under `root` and returns its directory."""
    for relative, text in TASK_FILES.items():
        path = root / "suite" / "trivial" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "suite"
