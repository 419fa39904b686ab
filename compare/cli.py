"""The `leafcost` command line. Heavy libraries are imported inside commands, so `--help` stays instant."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from compare.cli_common import (
    DbOption, JsonOption, NamespaceOption, OneLineUsageErrors, TagOption, WideOption, fail)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False, cls=OneLineUsageErrors,
                  help="Cost per resolved coding task: self-hosted vs hosted models on the same Leaf episodes.")

WorkersOption = Annotated[int, typer.Option("--workers", "-w", min=1, help="tasks run in parallel")]
UnsafeOption = Annotated[bool, typer.Option(
    "--unsafe-no-isolation", help="run tools in a plain subprocess without bubblewrap (results are marked)")]
BaseRootOption = Annotated[str, typer.Option(
    "--base-root", help="'host' (the host's /usr, /etc, ...) or a root directory, bound read-only")]
BindOption = Annotated[list[str] | None, typer.Option(
    "--bind-ro", help="extra directory bound read-only at the same path (e.g. a toolchain under a home dir)")]


BackendOption = Annotated[str, typer.Option(
    "--backend", help="local (bubblewrap over this host), podman or docker (each task's own container image), or "
    "kubernetes (the locked images in pods of --kube-namespace, by the current kubeconfig context)")]
KubeNamespaceOption = Annotated[str, typer.Option("--kube-namespace", help="kubernetes: where the pods go")]
ImagesOption = Annotated[Path | None, typer.Option(
    "--images", help="containers: an image lock (`leafcost images lock`) every task's image must match")]


def sandbox_options(base_root: str, bind_ro: list[str] | None, unsafe: bool, backend: str = "local",
                    images: Path | None = None, kube_namespace: str = "default"):
    from sandbox import BACKENDS, SandboxError, SandboxOptions, require_backend
    from sandbox.backends import unknown_backend

    if backend not in BACKENDS:
        fail(f"--backend: {unknown_backend(backend)}", 2)
    if backend != "local" and (base_root != "host" or bind_ro or unsafe):
        fail(f"--base-root, --bind-ro and --unsafe-no-isolation apply to the local backend only, not {backend}", 2)
    if images is not None and (backend == "local" or not images.is_file()):
        fail(f"--images {images}: " + ("an image lock applies to the podman, docker and kubernetes backends only"
                                       if backend == "local" else "no such file"), 2)
    if base_root != "host" and not Path(base_root, "usr").is_dir():
        fail(f"--base-root {base_root}: not a root directory (no usr/ in it)", 2)
    for path in bind_ro or []:
        if not os.path.isabs(path) or not os.path.isdir(path):
            fail(f"--bind-ro {path}: must be an existing absolute directory", 2)
    options = SandboxOptions(backend=backend, base_root=base_root, extra_ro_binds=list(bind_ro or []),
                             unsafe_no_isolation=unsafe, images_lock=images, kube_namespace=kube_namespace)
    try:
        require_backend(options)
    except SandboxError as exc:
        fail(str(exc), 2)
    if unsafe:
        typer.echo("leafcost: WARNING --unsafe-no-isolation: tools run unsandboxed on this host; every result "
                   "is marked isolation=none", err=True)
    return options


@app.command()
def validate(
    suite: Annotated[str, typer.Argument(help="'builtin', a directory of Harbor tasks, or a SWE-bench .json/.jsonl")],
    workers: WorkersOption = 2,
    as_json: JsonOption = False,
    swebench_namespace: NamespaceOption = None,
    swebench_tag: TagOption = None,
    base_root: BaseRootOption = "host",
    bind_ro: BindOption = None,
    unsafe_no_isolation: UnsafeOption = False,
    backend: BackendOption = "local",
    images: ImagesOption = None,
    kube_namespace: KubeNamespaceOption = "default",
    wide: WideOption = False,
) -> None:
    """Prove every task solvable (oracle resolves) and not solved by doing nothing (empty run fails)."""
    options = sandbox_options(base_root, bind_ro, unsafe_no_isolation, backend, images, kube_namespace)
    report = _validate(suite, workers, swebench_images(swebench_namespace, swebench_tag), options, as_json, wide)
    raise typer.Exit(0 if report.invalid == 0 else 1)


@app.command()
def run(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="the run spec")],
    resume: Annotated[str | None, typer.Option("--resume", metavar="RUN_ID",
                                               help="finish an interrupted run: only unfinished episodes run")] = None,
    db: DbOption = None,
    serve_port: Annotated[int | None, typer.Option(
        "--serve", metavar="PORT", min=1, max=65535,
        help="also serve the API and web page on 127.0.0.1:PORT while the run writes the ledger")] = None,
    strict_grading: Annotated[bool, typer.Option(
        "--strict-grading", help="this run's figures count a resolved attempt whose patch touches the test harness "
                                 "(conftest.py, pytest settings, the graded tests...) as not resolved")] = False,
    wide: WideOption = False,
    as_json: JsonOption = False,
) -> None:
    """Run every arm of SPEC.yaml on the same episodes, recording every call in the ledger."""
    from compare.spec import SpecError, load_run_spec

    try:
        spec = load_run_spec(spec_path)
    except SpecError as exc:
        fail(str(exc), 2)
    record = resume is None and (spec.decide is not None or spec.plan is not None)  # a resume keeps its plan
    planned = None
    if spec.decide is not None or spec.plan is not None:  # else there is nothing to plan (and no numpy to load)
        from compare.planning import plan_for_run, round_cost_problem

        planned = plan_for_run(spec, db, record=record)  # before the ledger is opened for writing
        if (problem := round_cost_problem(spec, planned)) is not None:  # nothing is recorded
            fail(f"{spec_path}: {problem}", 2)
    summary = run_spec(spec, db, resume=resume, as_json=as_json, rerun=f"leafcost run {spec_path}",
                        serve_port=serve_port, strict_grading=strict_grading, wide=wide,
                        plan=planned.model_dump(mode="json") if record and planned is not None else None)
    if spec.claim is not None and not as_json:  # the claim's page after the figures (`leafcost claim RUN --json`)
        from compare.claim import print_claim

        if (document := claim_of_run(Path(summary.db), summary.run_id)) is not None:
            print_claim(document)
    raise typer.Exit(0 if summary.status == "finished" else 1)


def claim_of_run(db_path: Path, run_id: str):
    """The claim document of a finished or stopped run (compare.claim), read back from its ledger; None: the run
    has no claim."""
    from compare.claim import claim_document
    from compare.ledger import LedgerAccess, LedgerError

    try:
        with LedgerAccess(db_path).reading() as conn:
            return claim_document(conn, run_id)
    except LedgerError as exc:
        fail(str(exc), 2)


@app.command()
def plan(
    spec_path: Annotated[Path, typer.Argument(metavar="SPEC.yaml", help="the run spec")],
    pilot: Annotated[str | None, typer.Option("--pilot", metavar="RUN_ID", help="a small run of these arms whose "
                                              "figures stand in for the full run's")] = None,
    target: Annotated[str | None, typer.Option("--target", help="avg-width=W: the tasks × seeds for a 95 % Avg@k "
                                               "interval at most W wide; decide: the tasks that decide the spec's "
                                               "question with probability ≥ 0.9")] = None,
    simulations: Annotated[int, typer.Option("--simulations", min=10, max=100_000,
                                             help="simulated sequential runs (decide: and --target decide)")] = 200,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Before a run: per arm and for the comparison, the episodes, wall time, dollars and interval widths the run
    would reach; with decide:, a Monte Carlo of the sequential run; with --target, what reaching it costs."""
    from compare.plan_printing import print_plan
    from compare.plan_sources import PlanError
    from compare.planning import make_plan
    from compare.spec import SpecError, load_run_spec

    try:
        spec = load_run_spec(spec_path)
    except SpecError as exc:
        fail(str(exc), 2)
    try:
        document = make_plan(spec, db=db, pilot=pilot, target=target, simulations=simulations)
    except PlanError as exc:
        fail(str(exc), 2)
    if as_json:
        sys.stdout.write(document.model_dump_json(indent=2) + "\n")
    else:
        print_plan(document)


def run_spec(spec, db: Path | None, *, resume: str | None, as_json: bool, rerun: str,
              skip_arms: dict[str, str] | None = None, serve_port: int | None = None, strict_grading: bool = False,
              wide: bool = False, plan: dict | None = None):
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from compare.arm_table import fmt_usd
    from compare.cli_common import progress_bars
    from compare.ledger import Ledger, LedgerError, default_db_path
    from compare.runner import Runner, RunError

    db_path = Path(db or default_db_path())
    err = Console(stderr=True)
    columns = (TextColumn("{task.description:<14}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("resolved {task.fields[resolved]}  errors {task.fields[errors]}  "
                          "spend {task.fields[spend]}"), TimeElapsedColumn())
    try:
        ledger = Ledger.open(db_path)
    except LedgerError as exc:  # not a ledger, or another process holds it
        fail(str(exc), 2)
    server = _serve_during_run(ledger, serve_port) if serve_port else None
    try:
        with progress_bars(*columns, console=err, transient=as_json) as progress:
            bars: dict[str, int] = {}

            def show(arm) -> None:
                if arm.arm not in bars:
                    bars[arm.arm] = progress.add_task(arm.arm, total=arm.total or 1, resolved=0, errors=0,
                                                      spend=fmt_usd(0.0))
                progress.update(bars[arm.arm], completed=arm.done, resolved=arm.resolved, errors=arm.errors,
                                spend=fmt_usd(arm.spend_usd))

            runner = Runner(spec, ledger, db_path=db_path, run_id=resume, skip_arms=skip_arms, on_progress=show,
                            strict_grading=strict_grading, plan=plan)
            try:
                summary = asyncio.run(_until_terminated(runner.run()))
            except RunError as exc:
                fail(str(exc), 2)
            except KeyboardInterrupt:
                fail(f"interrupted; finish it with: {rerun} --resume {runner.run_id} --db {db_path}", 130)
            except asyncio.CancelledError:
                fail(f"terminated; finish it with: {rerun} --resume {runner.run_id} --db {db_path}", 143)
    finally:
        if server is not None:
            server.stop()
        ledger.close()
    if any(arm.released is not None for arm in spec.arms):
        from compare.cli_results import run_freshness_of

        summary = summary.model_copy(update={"freshness": run_freshness_of(db_path, summary.run_id)})
    if as_json:
        sys.stdout.write(summary.model_dump_json(indent=2) + "\n")
    else:
        _print_run_summary(summary, wide)
    return summary


def _serve_during_run(ledger, port: int):
    """The API and web page on 127.0.0.1:PORT from this process, reading through the writing ledger."""
    from compare.api import API_TOKEN_ENV
    from compare.ledger import InProcessLedgerAccess
    from compare.serve import BackgroundServer, build_app

    app = build_app(ledger.path, api_token=os.environ.get(API_TOKEN_ENV) or None,
                    access=InProcessLedgerAccess(ledger))
    try:
        server = BackgroundServer(app, "127.0.0.1", port).start()
    except RuntimeError as exc:
        ledger.close()
        fail(str(exc), 2)
    typer.echo(f"serving the API and the web page on {server.url} while the run writes {ledger.path}", err=True)
    return server


def _print_run_summary(summary, wide: bool = False) -> None:
    """One row per arm; an arm's status and its reason are a column with --wide, else a line below the table (a
    reason is a sentence, too long for a column in 80)."""
    from rich.table import Table

    from compare.arm_table import fmt_usd
    from compare.display import shown, terminal
    from compare.freshness import print_freshness

    table = Table(title=f"leafcost run {summary.run_id} ({summary.status})")
    for column in ("arm", "episodes", "resolved", "errors", "spend") + (("note",) if wide else ()):
        table.add_column(column, overflow="fold")
    notes = []
    for arm in summary.arms:
        note = shown(arm.status_reason or ("" if arm.status == "ready" else arm.status))
        table.add_row(shown(arm.arm), f"{arm.done}/{arm.total}", str(arm.resolved), str(arm.errors),
                      fmt_usd(arm.spend_usd), *((note,) if wide else ()))
        if note and not wide and not any(arm.status_reason in warning for warning in summary.warnings):
            notes.append(f"{shown(arm.arm)}: {note}")  # unless a warning below says it already
    console = terminal()
    console.print(table)
    if summary.decision:  # a run with decide: stopped: its verdict, before anything else is said
        console.print(f"[bold]{shown(summary.decision)}[/bold]")
    for note in notes:
        console.print(note)
    print_freshness(summary.freshness)  # only when an arm has released: and a task has a date
    for warning in summary.warnings:
        console.print(f"[yellow]warning:[/yellow] {shown(warning)}")  # quotes tasks, endpoints and models
    console.print(f"ledger: {shown(summary.db)}\ntrajectories: {shown(summary.trajectories)}")


@app.command()
def demo(
    resume: Annotated[str | None, typer.Option("--resume", metavar="RUN_ID",
                                               help="finish an interrupted demo run")] = None,
    with_router: Annotated[bool, typer.Option(
        "--with-router", help="add the arm router-smol: a real router on this machine (litellm's proxy in front "
                              "of a local model, priced at gpt-5-mini's list prices), its reported cost reconciled "
                              "with ours")] = False,
    db: DbOption = None,
    wide: WideOption = False,
    as_json: JsonOption = False,
) -> None:
    """The embedded default: the built-in suite with the oracle, a real local CPU model, and a hosted arm when
    ROUTER_API_KEY is set; prints the summary and where the ledger is."""
    from contextlib import nullcontext

    from adapters.litellm_proxy import ProxyError
    from adapters.local_server import LocalModelError
    from compare.demo import arms_to_compare, demo_spec, leafcost_program, local_router, next_steps

    try:
        spec, skipped = demo_spec(with_router=with_router)
    except ValueError as exc:
        fail(str(exc), 2)
    program, not_on_path = leafcost_program()  # `make demo` leaves leafcost in .venv/bin/: say how to type it
    router = nullcontext()
    if with_router:
        if not as_json:
            typer.echo("starting a local model server and litellm's proxy in front of it (~15 s)...", err=True)
        router = local_router()
    try:
        with router:
            summary = run_spec(spec, db, resume=resume, as_json=as_json,
                                rerun=f"{program} demo" + (" --with-router" if with_router else ""), skip_arms=skipped,
                                wide=wide)
    except (ProxyError, LocalModelError) as exc:  # the router did not start: nothing ran yet
        fail(f"the local router for --with-router did not start: {exc}", 2)
    if not as_json:
        from compare.cli_results import print_run_figures

        ran = print_run_figures(summary.db, summary.run_id, wide)
        pair = arms_to_compare(ran)
        for line in [*next_steps(summary.run_id, summary.db, program, pair), *filter(None, [not_on_path])]:
            typer.echo(line)
    raise typer.Exit(0 if summary.status == "finished" else 1)


async def _until_terminated(work):
    """`work`, cancelled on SIGTERM as Ctrl-C cancels it: the run records itself interrupted and removes its
    sandboxes (a plain SIGTERM would end the process with containers or pods left running)."""
    import asyncio
    import signal

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, asyncio.current_task().cancel)
    return await work


sglang_app = typer.Typer(help="Serving FrogNano on SGLang (runs elsewhere: leafcost only talks HTTP to it).")
app.add_typer(sglang_app, name="sglang")


@sglang_app.command("command")
def sglang_command(
    model_path: Annotated[str, typer.Option(help="weights on the serving machine")] = "microsoft/FrogNano-4B-2609",
    port: int = 30000,
    tp: Annotated[int, typer.Option(help="tensor parallel size (GPUs)")] = 1,
    context_length: int = 131072,
) -> None:
    """Print the exact SGLang launch command for FrogNano (reasoning and tool-call parsers, metrics, cache report)."""
    from adapters.sglang import launch_command_text

    typer.echo(launch_command_text(model_path=model_path, port=port, tp=tp, context_length=context_length))


SGLANG_IMAGE_HELP = ("the SGLang server image to deploy, pinned to a release or a digest, e.g. "
                     "lmsysorg/sglang:v0.5.11-cu129")


@sglang_app.command("manifest")
def sglang_manifest(
    image: Annotated[str | None, typer.Option(help=f"required: {SGLANG_IMAGE_HELP}", show_default=False)] = None,
    name: Annotated[str, typer.Option(help="the Deployment and Service name (an arm's gpu.from_deployment)")] =
    "frognano",
    namespace: str = "default",
    weights_claim: Annotated[str, typer.Option(help="the PersistentVolumeClaim holding the weights, mounted "
                                                    "read-only at /models")] = "frognano-weights",
    model_path: Annotated[str, typer.Option(help="the weights inside the container")] = "/models/FrogNano-4B-2609",
    gpus: Annotated[int, typer.Option(help="GPUs (the tensor-parallel size), at least 1")] = 1,
    gpu_type: Annotated[str | None, typer.Option(help="the nodes' nvidia.com/gpu.product label, e.g. "
                                                      "NVIDIA-H200")] = None,
    port: int = 30000,
    context_length: int = 131072,
    as_json: JsonOption = False,
) -> None:
    """Print a Deployment and Service that run FrogNano on SGLang in a cluster, with `sglang command`'s launch."""
    from adapters.sglang_manifest import sglang_manifests

    # Checked here, not by typer: its usage box is not the one `leafcost:` line every other mistake gets.
    if not image:
        fail(f"sglang manifest needs --image: {SGLANG_IMAGE_HELP}", 2)
    if gpus < 1:
        fail(f"--gpus {gpus}: the tensor-parallel size is at least 1", 2)

    _print_manifests(sglang_manifests(name=name, namespace=namespace, image=image, model_path=model_path,
                                      weights_claim=weights_claim, gpus=gpus, gpu_type=gpu_type, port=port,
                                      context_length=context_length), as_json)


kubernetes_app = typer.Typer(help="The kubernetes sandbox backend: what an administrator applies for it.")
app.add_typer(kubernetes_app, name="kubernetes")


@kubernetes_app.command("rbac")
def kubernetes_rbac(
    namespace: Annotated[str, typer.Option(help="the namespace the run's pods go in (sandbox.kubernetes.namespace)")]
    = "default",
    as_json: JsonOption = False,
) -> None:
    """Print the runner's ServiceAccount, Role and RoleBinding (the least it needs, in one namespace) and the
    namespace's NetworkPolicies (deny-all for tasks without network, outside-only for SWE-bench verifiers)."""
    import re

    from compare.spec import NAMESPACE_PATTERN
    from sandbox.kubernetes.manifests import network_policies, runner_rbac

    if not re.fullmatch(NAMESPACE_PATTERN, namespace):  # what the cluster would refuse when they are applied
        fail(f"--namespace {namespace!r}: not a Kubernetes namespace name (lowercase letters, digits and '-', "
             "at most 63, starting and ending with a letter or digit)", 2)
    _print_manifests([*runner_rbac(namespace), *network_policies(namespace)], as_json)


def _print_manifests(manifests: list[dict], as_json: bool) -> None:
    import yaml

    text = json.dumps(manifests, indent=2)
    # YAML from the JSON text: no object is shared, so no anchors (&id001) for kubectl's reader to meet.
    typer.echo(text if as_json else yaml.safe_dump_all(json.loads(text), sort_keys=False).rstrip())


images_app = typer.Typer(help="Container images of a suite's tasks (the podman and docker backends).")
app.add_typer(images_app, name="images")
app.add_typer(__import__("compare.cli_swebench", fromlist=["swebench_app"]).swebench_app, name="swebench")


@images_app.command("lock")
def images_lock(
    suite: Annotated[str, typer.Argument(help="'builtin', a directory of Harbor tasks, or a SWE-bench .json/.jsonl")],
    output: Annotated[Path, typer.Option("--output", "-o", help="the lock file to write")] = Path("images.lock.json"),
    backend: Annotated[str, typer.Option(help="podman or docker")] = "podman",
    swebench_namespace: NamespaceOption = None,
    swebench_tag: TagOption = None,
    as_json: JsonOption = False,
) -> None:
    """Build or pull every task's image and pin each to its image ID; a run spec requires it with `images:`."""
    import asyncio

    from compare.arm_table import counted
    from compare.display import clean
    from sandbox import SuiteError, load_suite
    from sandbox.container.engine import engine as container_engine
    from sandbox.container.images import lock_images

    if backend == "local":
        fail("--backend local builds no images: choose podman or docker", 2)
    options = sandbox_options("host", None, False, backend)
    try:
        suite_tasks = load_suite(suite, cache_dir=options.cache_dir,
                                 swebench_images=swebench_images(swebench_namespace, swebench_tag))
    except SuiteError as exc:
        fail(str(exc), 2)
    failures = [f"{error.task_id}: {error.error}" for error in suite_tasks.errors]
    rows: list[dict] = []

    def done(task, image, error) -> None:
        rows.append({"task": task.task_id, "image": image.reference if image else None,
                     "id": image.id if image else None, "error": error})
        if error:
            failures.append(error)
        typer.echo(clean(f"[{len(rows)}/{len(suite_tasks.tasks)}] {task.task_id}: "
                         + (f"{image.reference} {image.id[:19]}" if image else f"FAILED {error}")), err=True)

    asyncio.run(lock_images(container_engine(backend), suite_tasks.tasks, output, on_task=done))
    if as_json:
        sys.stdout.write(json.dumps({"lock": str(output), "tasks": rows, "errors": failures}, indent=2) + "\n")
    else:
        for error in suite_tasks.errors:  # a task's build or pull failure was printed as its line above
            typer.echo(f"leafcost: {clean(f'{error.task_id}: {error.error}')}", err=True)
        typer.echo(f"wrote {output}: {sum(1 for row in rows if not row['error'])} of "
                   f"{counted(len(suite_tasks.tasks) + len(suite_tasks.errors), 'task')} locked")
    raise typer.Exit(1 if failures else 0)


def swebench_images(namespace: str | None, tag: str | None):
    """The --swebench-namespace/--swebench-tag pair, checked; exits 2 naming the option when it is malformed."""
    from pydantic import ValidationError

    from sandbox import SWEBenchImages

    try:
        return SWEBenchImages(namespace=namespace, tag=tag)
    except ValidationError as exc:
        first = exc.errors()[0]
        fail(f"--swebench-{first['loc'][0]} {first['input']!r}: {first['msg']}", 2)


def _validate(suite_name: str, workers: int, images, options, as_json: bool, wide: bool = False):
    import asyncio

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from compare.display import clean, shown
    from compare.validate import validate_suite
    from sandbox import SuiteError, load_suite

    try:
        suite = load_suite(suite_name, cache_dir=options.cache_dir, swebench_images=images)
    except SuiteError as exc:
        fail(str(exc), 2)
    if not suite.tasks and not suite.errors:
        fail(f"suite {suite_name!r} has no tasks", 2)
    for task in suite.tasks:  # one line each, never wrapped
        for warning in task.warnings:
            typer.echo(f"leafcost: warning: {clean(warning)}", err=True)
    err = Console(stderr=True)
    columns = (TextColumn("validating {task.fields[suite]}", markup=False), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[last]}"), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=as_json) as progress:
        bar = progress.add_task("validate", total=len(suite.tasks) + len(suite.errors), suite=clean(suite.name),
                                last="")

        def done(result) -> None:
            mark = "ok" if result.valid else "INVALID"
            progress.update(bar, advance=1, last=f"{shown(result.task_id)}: {mark}")

        report = asyncio.run(validate_suite(suite, options, workers=workers, on_result=done))
    if as_json:
        sys.stdout.write(json.dumps(report.model_dump(), indent=2) + "\n")
    else:
        _print_table(report, unsafe=options.unsafe_no_isolation, wide=wide)
    return report


def _print_table(report, unsafe: bool, wide: bool = False) -> None:
    """One row per task; its seconds and error are columns with --wide, else the errors follow the table, one
    task each (the verifier's last lines are too long for a column in 80)."""
    from rich.table import Table

    from compare.display import shown, terminal

    def verdict(value: bool | None) -> str:
        return {True: "resolved", False: "not resolved", None: "-"}[value]

    title = "leafcost validate" + (" \\[UNSAFE: no isolation]" if unsafe else "")
    table = Table(title=title)
    for column in ("task", "oracle", "empty run", "valid") + (("seconds", "error") if wide else ()):
        table.add_column(column, overflow="fold")
    for task in report.tasks:
        table.add_row(shown(task.task_id), verdict(task.oracle_resolved), verdict(task.empty_resolved),
                      "yes" if task.valid else "NO",
                      *((f"{task.seconds:.1f}", shown(task.error or "")) if wide else ()))
    console = terminal()
    console.print(table)
    for task in report.tasks if not wide else ():
        if task.error:
            console.print(shown(f"{task.task_id}: {task.error}"))
    console.print(f"valid: {report.valid}  invalid: {report.invalid}")


if __name__ == "__main__":
    app()




def _register_results_commands() -> None:
    """The figures of a run (cli_results), the report files (reports/, which renders what compare computes)
    and the API server are commands of this app: the CLI is where the packages meet."""
    from compare import cli_mine, cli_results, serve
    from reports import cli as reports_cli

    for command in (cli_results.summary, cli_results.compare, cli_results.reprice, cli_results.breakeven,
                    reports_cli.report, cli_mine.mine):
        app.command(command.__name__)(command)
    app.command("serve")(serve.main)
    app.command("reproduce")(__import__("compare.cli_reproduce", fromlist=["reproduce"]).reproduce)
    from compare import cli_claim
    app.command("claim")(cli_claim.claim)


_register_results_commands()
