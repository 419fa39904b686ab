"""A person's mistakes, met as a person meets them: the real `leafcost` console script, one `leafcost:` line on
stderr saying what is wrong and what to do, a non-zero exit, and no library text (no traceback, no usage box)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from adapters.base import AdapterError
from adapters.router import RouterAdapter
from sandbox.kubernetes.pods import _in_cluster

LEAFCOST = Path(sys.executable).with_name("leafcost")
ORACLE_SPEC = "name: oops\nsuite: builtin\nseeds: 1\nlimit: 1\narms:\n  - {name: oracle, adapter: oracle}\n"


def leafcost(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environment = {**os.environ, "LEAFCOST_CACHE": str(cwd / "cache"), **(env or {})}
    return subprocess.run([str(LEAFCOST), *args], capture_output=True, text=True, cwd=cwd, env=environment,
                          timeout=600)


def one_line(result: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single stderr line of a failed command, checked to be ours."""
    lines = result.stderr.splitlines()
    assert result.returncode == code and len(lines) == 1 and lines[0].startswith("leafcost: "), result.stderr
    return lines[0]


def closed_port() -> int:
    """A port nobody listens on: bound, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def write(folder: Path, text: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


# 1. a dead endpoint ------------------------------------------------------------------------------------------------

def test_a_dead_endpoint_is_named_with_the_fix_on_the_console_and_in_the_ledger(tmp_path):
    port = closed_port()
    url = f"http://127.0.0.1:{port}/v1"
    spec = write(tmp_path, ORACLE_SPEC.replace("{name: oracle, adapter: oracle}", f"{{name: frog, adapter: sglang, "
                           f"model: m, base_url: '{url}', gpu: {{type: H200, usd_per_hour: 3.5}}}}"))
    line = one_line(leafcost("run", str(spec), "--db", str(tmp_path / "l.duckdb"), cwd=tmp_path))
    said = (f"arm frog: cannot connect to {url} (connection refused): is the server running? check the arm's "
            "base_url")
    assert line == f"leafcost: {said}"
    with duckdb.connect(str(tmp_path / "l.duckdb"), read_only=True) as ledger:
        assert ledger.sql("select status, status_reason from arms").fetchall() == [("failed", said.split(": ", 1)[1])]


def test_a_call_to_a_dead_endpoint_keeps_its_kind_and_hides_the_key(monkeypatch):
    monkeypatch.setenv("LEAFCOST_TEST_KEY", "sk-test-0123456789abcdef")
    port = closed_port()
    adapter = RouterAdapter(model="m", base_url=f"http://127.0.0.1:{port}/v1?token=hunter2secret",
                            api_key_env="LEAFCOST_TEST_KEY", max_retries=0)

    async def call() -> AdapterError:
        try:
            with pytest.raises(AdapterError) as caught:
                await adapter.chat([{"role": "user", "content": "hi"}], [])
            return caught.value
        finally:
            await adapter.stop()

    error = asyncio.run(call())
    assert error.kind == "unreachable" and [a.status for a in error.attempts] == ["connection_error"]
    said = (f"cannot connect to http://127.0.0.1:{port}/v1?token=[redacted] (connection refused): is the server "
            "running? check the arm's base_url")
    assert str(error) == said and error.attempts[0].error == said


# 2. no kubeconfig ---------------------------------------------------------------------------------------------------

@pytest.mark.skipif(_in_cluster(), reason="inside a cluster the service account is the configuration")
def test_no_kubeconfig_says_where_it_was_looked_for(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    home = tmp_path / "home"
    home.mkdir()
    result = subprocess.run([str(LEAFCOST), "validate", "builtin", "--backend", "kubernetes"], capture_output=True,
                            text=True, cwd=tmp_path, env={**env, "HOME": str(home)}, timeout=600)
    assert one_line(result) == ("leafcost: no kubeconfig: set KUBECONFIG to your cluster's kubeconfig, or put it at "
                                "~/.kube/config (or run leafcost inside a cluster)")
    listed = leafcost("validate", "builtin", "--backend", "kubernetes", cwd=tmp_path,
                      env={"KUBECONFIG": f"{tmp_path}/a{os.pathsep}{tmp_path}/b"})
    assert one_line(listed) == (f"leafcost: no kubeconfig: $KUBECONFIG names {tmp_path}/a, {tmp_path}/b, and none "
                                "exists: point KUBECONFIG at your cluster's kubeconfig")
    (tmp_path / "lock.json").write_text("{}")
    spec = write(tmp_path, ORACLE_SPEC + f"sandbox: {{backend: kubernetes, images: {tmp_path}/lock.json, "
                                         f"kubernetes: {{kubeconfig: {tmp_path}/none.kc}}}}\n")
    named = leafcost("run", str(spec), "--db", str(tmp_path / "l.duckdb"), cwd=tmp_path)
    assert one_line(named) == (f"leafcost: no kubeconfig at {tmp_path}/none.kc: fix the spec's "
                               "sandbox.kubernetes.kubeconfig")


# 3. an unknown adapter ----------------------------------------------------------------------------------------------

def test_an_unknown_adapter_lists_the_kinds_there_are(tmp_path):
    from compare.arms import ARM_TAGS

    spec = write(tmp_path, ORACLE_SPEC.replace("adapter: oracle", "adapter: vllm"))
    line = one_line(leafcost("run", str(spec), cwd=tmp_path))
    kinds = ", ".join(sorted(ARM_TAGS))  # the registry's, whatever it holds
    assert line == f"leafcost: {spec}: arms.0.adapter: unknown adapter 'vllm': choose one of {kinds}"
    assert {"local", "oracle", "router", "sglang"} <= ARM_TAGS
    missing = write(tmp_path, ORACLE_SPEC.replace("adapter: oracle", "model: m"), "missing.yaml")
    line = one_line(leafcost("run", str(missing), cwd=tmp_path))
    assert line == f"leafcost: {missing}: arms.0.adapter: missing: choose one of {kinds}"


# 4. broken YAML -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, said", [
    ("name: x\nsuite: builtin\narms:\n  - name: a\n\tadapter: oracle\n",
     "line 5, column 1: a tab (YAML indents with spaces only): fix the YAML"),
    ("name: x\nsuite: builtin\narms: [\n  {name: a, adapter: oracle}\n",
     "line 5, column 1: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence opened at line 3, "
     "column 7): fix the YAML"),
])
def test_broken_yaml_is_one_line_with_where_and_what(tmp_path, text, said):
    spec = write(tmp_path, text)
    assert one_line(leafcost("run", str(spec), cwd=tmp_path)) == f"leafcost: {spec} {said}"


# 5. sglang manifest without --image ---------------------------------------------------------------------------------

def test_sglang_manifest_without_image_says_which_image(tmp_path):
    result = leafcost("sglang", "manifest", cwd=tmp_path)
    assert one_line(result) == ("leafcost: sglang manifest needs --image: the SGLang server image to deploy, pinned to "
                                "a release or a digest, e.g. lmsysorg/sglang:v0.5.11-cu129")
    assert result.stdout == ""
    assert one_line(leafcost("sglang", "manifest", "--image", "x", "--gpus", "0", cwd=tmp_path)) == (
        "leafcost: --gpus 0: the tensor-parallel size is at least 1")


# the same class of mistake elsewhere --------------------------------------------------------------------------------

@pytest.mark.parametrize("args, said", [
    (["run"], "run: Missing argument 'SPEC.yaml': see `leafcost run --help`"),
    (["compare", "some-run"], "compare: Missing option '--arms': see `leafcost compare --help`"),
    (["reprice", "some-run", "--prices", "absent.yaml"],
     "reprice: Invalid value for '--prices': file 'absent.yaml' does not exist: see `leafcost reprice --help`"),
    (["run", "spec.yaml", "--serve", "99999"],
     "run: Invalid value for '--serve': Input should be less than or equal to 65535: see `leafcost run --help`"),
    (["sglang"], "sglang: Missing command: see `leafcost sglang --help`"),
    (["nosuchcommand"], "No such command 'nosuchcommand': see `leafcost --help`"),
])
def test_usage_mistakes_are_one_line_naming_the_help(tmp_path, args, said):
    result = leafcost(*args, cwd=tmp_path)
    assert one_line(result) == f"leafcost: {said}" and result.stdout == ""


def test_leafcost_alone_still_prints_its_help(tmp_path):
    result = leafcost(cwd=tmp_path)
    assert result.returncode == 2 and "Usage: leafcost" in result.stdout and result.stderr == ""


def test_a_spec_that_is_missing_a_directory_or_not_text(tmp_path):
    absent = one_line(leafcost("run", "absent.yaml", cwd=tmp_path))
    assert absent == "leafcost: absent.yaml: no such file: check the path"
    (tmp_path / "specs").mkdir()
    assert one_line(leafcost("run", "specs", cwd=tmp_path)) == ("leafcost: specs: a directory, not a file: name the "
                                                                "YAML file")
    (tmp_path / "binary.yaml").write_bytes(b"name: \xff\xfe\n")
    assert one_line(leafcost("run", "binary.yaml", cwd=tmp_path)) == ("leafcost: binary.yaml: not UTF-8 text (byte 6): "
                                                                      "give the YAML file itself")


def test_run_with_a_db_that_is_no_ledger_or_is_held_by_another_process(tmp_path):
    spec = write(tmp_path, ORACLE_SPEC)
    (tmp_path / "garbage.duckdb").write_text("not a database\n")
    line = one_line(leafcost("run", str(spec), "--db", "garbage.duckdb", cwd=tmp_path))
    assert line.startswith("leafcost: garbage.duckdb: not a leafcost ledger (not a DuckDB file)")
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); "
                               "print('open', flush=True); sys.stdin.read()", str(tmp_path / "held.duckdb")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        held = one_line(leafcost("run", str(spec), "--db", "held.duckdb", cwd=tmp_path))
    finally:
        holder.communicate("")
    assert held.startswith(f"leafcost: held.duckdb: process {holder.pid} has this ledger open")
    assert held.endswith("close that process, or pass --db to write another file")


def test_resuming_an_unknown_run_is_one_line(tmp_path):
    spec = write(tmp_path, ORACLE_SPEC)
    line = one_line(leafcost("run", str(spec), "--db", "l.duckdb", "--resume", "nosuch", cwd=tmp_path))
    assert line == "leafcost: no run 'nosuch' in l.duckdb"


def test_a_file_that_is_no_ledger_is_refused_by_every_reader_and_by_serve_before_it_listens(tmp_path):
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    for args in (["summary", "r"], ["report", "r"], ["serve", "--port", str(closed_port())]):
        line = one_line(leafcost(*args, "--db", str(tmp_path / "notes.db"), cwd=tmp_path))
        assert "notes.db: not a leafcost ledger (not a DuckDB file): pass --db" in line, args


def test_kubernetes_rbac_refuses_a_namespace_no_cluster_would_take(tmp_path):
    line = one_line(leafcost("kubernetes", "rbac", "--namespace", "Team_A", cwd=tmp_path))
    assert line.startswith("leafcost: --namespace 'Team_A': not a Kubernetes namespace name")
    assert leafcost("kubernetes", "rbac", "--namespace", "team-a", cwd=tmp_path).returncode == 0
