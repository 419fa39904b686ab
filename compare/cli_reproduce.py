"""`leafcost reproduce PRESET`: a vendor's published claim (compare/presets/) as a run spec with the vendor's settings,
the benchmark's rows (and fresh mined ones), Leaf's prompt from the user's FrogNano clone and the images locked;
with --run it runs the spec and prints the claim's verdict. Every check is made before any episode runs, and a
failed one is one `leafcost:` line, exit 2. Registered on the app by compare.cli."""

from __future__ import annotations

import io
import json
import os
import sys
from contextlib import nullcontext, redirect_stdout
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

from compare.cli_common import DbOption, JsonOption, NamespaceOption, TagOption, fail

MODEL_ARMS_HINT = "one arm as a run spec's arms: entry (name, adapter, model, ...)"
NAMED = 5  # instances named in a message; the rest are counted


class ReproduceError(ValueError):
    """A reason the spec cannot be written; one line naming the option or field and the fix."""


@dataclass
class Prepared:
    """What `reproduce` wrote, for the summary it prints and its --json."""

    preset: Any  # ClaimPreset
    out: Path
    spec_path: Path
    suite_path: Path
    images_path: Path
    claim_arm: str
    arms: list[str]
    benchmark_tasks: int
    fresh_tasks: int
    early_stop: bool
    dataset_source: dict[str, Any] | None = None  # what `leafcost swebench export` recorded beside --dataset

    def document(self) -> dict[str, Any]:
        claim = self.preset.claim
        return {"preset": self.preset.name, "spec": str(self.spec_path), "suite": str(self.suite_path),
                "images": str(self.images_path), "claim_arm": self.claim_arm, "arms": self.arms,
                "benchmark": claim.benchmark, "benchmark_tasks": self.benchmark_tasks, "fresh_tasks": self.fresh_tasks,
                "claimed": {"avg_at_k": claim.avg_at_k, "pass_at_k": claim.pass_at_k, "k": claim.k},
                "early_stop": self.early_stop, "dataset_source": self.dataset_source,
                "unconfirmed": list(self.preset.unconfirmed),
                "run": f"leafcost run {self.spec_path}"}


def reproduce(
    preset: Annotated[str | None, typer.Argument(
        metavar="PRESET", help="a preset's name (see --list) or the path of a preset file")] = None,
    arm: Annotated[list[Path] | None, typer.Option(
        "--arm", metavar="ARM.yaml", help="an arm file (one arm, as in a spec's arms:); the first is the claim's arm, "
        "more are compared with it on the same episodes")] = None,
    dataset: Annotated[Path | None, typer.Option(
        "--dataset", metavar="ROWS.jsonl", help="the benchmark's SWE-bench rows (`leafcost swebench export`)")] = None,
    leaf_checkout: Annotated[Path | None, typer.Option(
        "--leaf-checkout", metavar="DIR", help="a clone of microsoft/FrogNano: Leaf's prompt and tools are read "
        "from it")] = None,
    fresh: Annotated[Path | None, typer.Option(
        "--fresh", metavar="MINED.jsonl", help="SWE-bench rows created after the model's release (the claim arm's "
        "released:), run beside the benchmark for the contamination gap")] = None,
    backend: Annotated[str, typer.Option("--backend", help="podman, docker or kubernetes (needs --images)")]
    = "podman",
    images: Annotated[Path | None, typer.Option(
        "--images", metavar="LOCK", help="an image lock covering every instance (default: lock them now)")] = None,
    swebench_namespace: NamespaceOption = None,
    swebench_tag: TagOption = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="where spec.yaml, suite.jsonl and images.lock.json go (default: "
        "./reproduce-PRESET)")] = None,
    full: Annotated[bool, typer.Option(
        "--full", help="run every instance (no early stop when the claim's verdict is settled)")] = False,
    run: Annotated[bool, typer.Option("--run", help="run the spec, then print the claim's verdict")] = False,
    db: DbOption = None,
    show_list: Annotated[bool, typer.Option("--list", help="list the presets and exit")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write (and with --run run) a spec that checks a vendor's published claim with the vendor's settings, naming
    every setting the vendor's publications and code do not confirm."""
    from compare.claim_preset import PresetError, load_preset

    if show_list:
        _print_presets(as_json)
        return
    if preset is None:
        fail("reproduce needs PRESET: a preset's name (`leafcost reproduce --list`) or a preset file's path", 2)
    try:
        chosen = load_preset(preset)
    except PresetError as exc:
        fail(str(exc), 2)
    from compare.cli import swebench_images

    instance_images = swebench_images(swebench_namespace, swebench_tag)  # exits 2 naming a malformed option
    try:
        _require_inputs(chosen, arm, dataset, leaf_checkout)
        prepared = prepare(chosen, arm_files=list(arm or []), dataset=dataset, leaf_checkout=leaf_checkout,
                           fresh=fresh, backend=backend, images=images, out=out, full=full,
                           swebench=instance_images)
    except ReproduceError as exc:
        fail(str(exc), 2)
    _print_prepared(prepared, as_json=as_json, run=run)
    if run:
        raise typer.Exit(_run_claim(prepared, db, as_json))


def prepare(preset, *, arm_files: list[Path], dataset: Path, leaf_checkout: Path, fresh: Path | None, backend: str,
            images: Path | None, out: Path | None, full: bool, swebench=None) -> Prepared:
    """Checks every input and writes OUT/suite.jsonl, OUT/images.lock.json and OUT/spec.yaml; ReproduceError (one
    line) on the first problem, before anything runs. `swebench`: the instance images' namespace and tag
    (sandbox.SWEBenchImages; unset, each row's own `image`)."""
    arms = [_read_arm(path) for path in arm_files]
    claim_arm = arms[0]
    if claim_arm.model.kind == "oracle":
        raise ReproduceError(f"--arm {arm_files[0]}: the claim's arm (the first --arm) is an oracle arm, which has "
                             "no model: put the model's arm first")
    checkout = _checked_checkout(leaf_checkout)
    raw_arms = _with_checkouts(arms, checkout)
    raw_arms[0] = _claim_sampling(raw_arms[0], preset, arm_files[0])
    benchmark = _benchmark_rows(_read_rows(dataset, "--dataset"), preset, dataset)
    fresh_rows = [] if fresh is None else _fresh_rows(_read_rows(fresh, "--fresh"), claim_arm.model.released, fresh,
                                                      {row["instance_id"] for row in benchmark}, arm_files[0])
    directory = _out_dir(out or Path(f"reproduce-{preset.name}"))
    suite_path = directory / "suite.jsonl"
    _write_atomic(suite_path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in benchmark + fresh_rows))
    options = _sandbox_options(backend, images)
    tasks = _load_tasks(suite_path, options, {row["instance_id"] for row in fresh_rows}, dataset, fresh, swebench)
    images_path = directory / "images.lock.json"
    _lock(tasks, backend, images, images_path)
    spec = _spec(preset, raw_arms, suite_path.resolve(), images_path.resolve(), backend, full, swebench)
    spec_path = directory / "spec.yaml"
    _write_spec(spec, spec_path)
    return Prepared(preset=preset, out=directory, spec_path=spec_path, suite_path=suite_path,
                    images_path=images_path, claim_arm=claim_arm.model.name, arms=[a.model.name for a in arms],
                    benchmark_tasks=len(benchmark), fresh_tasks=len(fresh_rows), early_stop=not full,
                    dataset_source=_dataset_source(dataset))


# --- the inputs ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ArmFile:
    raw: dict[str, Any]  # as written (the spec keeps the user's words)
    model: Any  # the validated arm


def _require_inputs(preset, arm: list[Path] | None, dataset: Path | None, leaf_checkout: Path | None) -> None:
    if not arm:
        raise ReproduceError(f"--arm: give the claim arm's file ({MODEL_ARMS_HINT}); the first --arm is the claim's")
    if dataset is None:
        raise ReproduceError(f"--dataset: give the {preset.claim.benchmark} rows "
                             f"(`{preset.dataset.export_command()}`)")
    if leaf_checkout is None:
        raise ReproduceError("--leaf-checkout: give a clone of microsoft/FrogNano: Leaf's prompt and tools are read "
                             "from it")


def _read_arm(path: Path) -> _ArmFile:
    from pydantic import TypeAdapter, ValidationError

    from compare.spec import Arm, SpecError, describe_validation_error, read_yaml

    try:
        raw = read_yaml(path)
    except SpecError as exc:
        raise ReproduceError(f"--arm {exc}") from None
    if not isinstance(raw, dict):
        raise ReproduceError(f"--arm {path}: an arm file is a mapping: {MODEL_ARMS_HINT}")
    try:
        model = TypeAdapter(Arm).validate_python(raw)
    except ValidationError as exc:
        raise ReproduceError(f"--arm {path}: {describe_validation_error(exc)}") from None
    return _ArmFile(raw=raw, model=model)


def _checked_checkout(checkout: Path) -> Path:
    from compare.leaf_prompt import LeafCheckoutError, read_leaf_checkout

    try:
        read_leaf_checkout(checkout)
    except LeafCheckoutError as exc:
        raise ReproduceError(f"--leaf-checkout {checkout}: {exc}") from None
    return checkout.expanduser().resolve()


def _with_checkouts(arms: list[_ArmFile], checkout: Path) -> list[dict[str, Any]]:
    """The arms as the spec writes them: the claim's arm sends Leaf's prompt and tools from the checkout, and so does
    every other model arm whose file names no clone of its own (the same words and tools for every arm)."""
    written = []
    for index, arm in enumerate(arms):
        if arm.model.kind == "oracle" or (index > 0 and arm.raw.get("leaf_checkout")):
            written.append(arm.raw)
        else:
            written.append({**arm.raw, "leaf_checkout": str(checkout)})
    return written


def _claim_sampling(raw: dict[str, Any], preset, path: Path) -> dict[str, Any]:
    """The claim arm's sampling is the published one: the arm file may leave a value out, not set it otherwise."""
    published = preset.settings.sampling.model_dump(exclude_none=True)
    own = raw.get("sampling") or {}
    for key, value in published.items():
        given = own.get(key)
        if key == "chat_template_kwargs" and isinstance(given, dict):
            for name, wanted in value.items():
                if name in given and given[name] != wanted:
                    raise ReproduceError(f"--arm {path}: sampling.chat_template_kwargs.{name}: {given[name]!r}, but "
                                         f"the published setting is {wanted!r}: remove it (the preset sets it)")
            value = {**given, **value}
        elif given is not None and given != value:
            raise ReproduceError(f"--arm {path}: sampling.{key}: {given!r}, but the published setting is {value!r}: "
                                 "remove it (the preset sets it)")
        own = {**own, key: value}
    return {**raw, "sampling": own}


def _read_rows(path: Path, option: str) -> list[dict[str, Any]]:
    """The SWE-bench rows of a JSON Lines file, each with an instance_id, none twice."""
    hint = "give SWE-bench rows as JSON Lines (`leafcost swebench export`)"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReproduceError(f"{option} {path}: no such file: {hint}") from None
    except IsADirectoryError:
        raise ReproduceError(f"{option} {path}: a directory: {hint}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ReproduceError(f"{option} {path}: cannot be read ({getattr(exc, 'strerror', None) or exc}): "
                             f"{hint}") from None
    rows, seen = [], set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReproduceError(f"{option} {path} line {number}: not JSON ({exc.msg}): {hint}") from None
        instance = row.get("instance_id") if isinstance(row, dict) else None
        if not isinstance(instance, str) or not instance:
            raise ReproduceError(f"{option} {path} line {number}: not a SWE-bench row (no instance_id): {hint}")
        if instance in seen:
            raise ReproduceError(f"{option} {path} line {number}: instance {instance} is given twice")
        seen.add(instance)
        rows.append(row)
    if not rows:
        raise ReproduceError(f"{option} {path}: no rows: {hint}")
    return rows


def _benchmark_rows(rows: list[dict[str, Any]], preset, path: Path) -> list[dict[str, Any]]:
    """The rows the claim was made on: the preset's listed instances (in its order), else every row, which must be
    as many as the benchmark has."""
    claim, wanted = preset.claim, preset.dataset
    export = f"export {wanted.name} split {wanted.split} (`{wanted.export_command()}`)"
    if wanted.instance_ids is None:
        if claim.instances is not None and len(rows) != claim.instances:
            raise ReproduceError(f"--dataset {path}: {len(rows)} instances, but {claim.benchmark} has "
                                 f"{claim.instances}: {export}")
        return rows
    by_id = {row["instance_id"]: row for row in rows}
    missing = [instance for instance in wanted.instance_ids if instance not in by_id]
    if missing:
        raise ReproduceError(f"--dataset {path}: {len(missing)} of the {len(wanted.instance_ids)} instances "
                             f"{claim.benchmark} needs are missing: {_named(missing)}: {export}")
    return [by_id[instance] for instance in wanted.instance_ids]


def _fresh_rows(rows: list[dict[str, Any]], released: date | None, path: Path, benchmark_ids: set[str],
                arm_path: Path) -> list[dict[str, Any]]:
    """Mined rows, each created after the claim arm's release day (UTC), none an instance of the benchmark."""
    from sandbox.tasks import parse_created_at

    if released is None:
        raise ReproduceError(f"--fresh needs the model's release day: add released: YYYY-MM-DD to {arm_path} (the "
                             "claim's arm)")
    early = []
    for row in rows:
        try:
            created = parse_created_at(row.get("created_at"))
        except ValueError:
            created = None
        if created is None or created.date() <= released:
            early.append(f"{row['instance_id']} ({created.date() if created else 'no created_at'})")
    if early:
        raise ReproduceError(f"--fresh {path}: {len(early)} of {len(rows)} rows are not created after the release "
                             f"day {released}: {_named(early)}: fresh tasks must be newer than the model")
    repeated = [row["instance_id"] for row in rows if row["instance_id"] in benchmark_ids]
    if repeated:
        raise ReproduceError(f"--fresh {path}: {len(repeated)} rows are benchmark instances too: {_named(repeated)}")
    return rows


def _named(items: list[str]) -> str:
    return ", ".join(items[:NAMED]) + (f" and {len(items) - NAMED} more" if len(items) > NAMED else "")


def _out_dir(directory: Path) -> Path:
    if directory.exists() and not directory.is_dir():
        raise ReproduceError(f"--out {directory}: a file, not a directory: name a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReproduceError(f"--out {directory}: cannot be created ({exc.strerror})") from None
    return directory


# --- the sandbox: the tasks and their images ---------------------------------------------------------------------

def _sandbox_options(backend: str, images: Path | None):
    from compare.cli import sandbox_options

    if backend == "local":
        raise ReproduceError("--backend local: SWE-bench instances run in their own images, locked to digests: "
                             "choose podman, docker or kubernetes")
    if backend == "kubernetes" and images is None:
        raise ReproduceError("--images: the kubernetes backend runs locked images: lock them first with `leafcost "
                             "images lock OUT/suite.jsonl` on a machine with podman or docker")
    return sandbox_options("host", None, False, backend, images)  # exits 2 with its own line when unusable


def _load_tasks(suite_path: Path, options, fresh_ids: set[str], dataset: Path, fresh: Path | None, swebench=None):
    from sandbox import SuiteError, load_suite

    try:
        suite = load_suite(str(suite_path), cache_dir=options.cache_dir, swebench_images=swebench)
    except SuiteError as exc:
        raise ReproduceError(str(exc)) from None
    if suite.errors:
        first = suite.errors[0]
        option = f"--fresh {fresh}" if first.task_id in fresh_ids else f"--dataset {dataset}"
        raise ReproduceError(f"{option}: {len(suite.errors)} instances cannot be run; the first: "
                             f"{first.error.splitlines()[0]}")
    return suite.tasks


def _lock(tasks, backend: str, images: Path | None, images_path: Path) -> None:
    """OUT/images.lock.json: a copy of --images once it covers every instance, else every image locked now."""
    if images is not None:
        _check_lock_covers(tasks, images)
        if images.resolve() != images_path.resolve():
            _write_atomic(images_path, images.read_text(encoding="utf-8"))
        return
    import asyncio

    from compare.display import clean
    from sandbox.container.engine import engine as container_engine
    from sandbox.container.images import lock_images

    failures: list[str] = []
    locked = 0

    def done(task, image, error) -> None:
        nonlocal locked
        locked += 1
        if error:
            failures.append(error.splitlines()[0])
        typer.echo(clean(f"locking images [{locked}/{len(tasks)}] {task.task_id}: "
                         + (f"{image.reference} {image.id[:19]}" if image else "FAILED")), err=True)

    asyncio.run(lock_images(container_engine(backend), tasks, images_path, on_task=done))
    if failures:
        raise ReproduceError(f"images: {len(failures)} of {len(tasks)} instances' images cannot be locked; the first: "
                             f"{failures[0]}")


def _check_lock_covers(tasks, images: Path) -> None:
    from sandbox.container.images import locked_entry, read_lock
    from sandbox.protocol import BuildError

    try:
        read_lock(images)
    except BuildError as exc:
        raise ReproduceError(f"--images {images}: {exc}") from None
    missing = []
    for task in tasks:
        kinds = ["tasks"] + (["verifiers"] if task.config.verifier_mode == "separate" else [])
        for kind in kinds:
            try:
                locked_entry(images, task, kind)
            except BuildError:
                missing.append(task.task_id)
                break
    if missing:
        raise ReproduceError(f"--images {images}: {len(missing)} of {len(tasks)} instances are not in the lock: "
                             f"{_named(missing)}: lock the suite again (`leafcost images lock SUITE`) or leave "
                             "--images out to lock them now")


# --- the spec ------------------------------------------------------------------------------------------------

def _spec(preset, arms: list[dict[str, Any]], suite: Path, images: Path, backend: str, full: bool,
          swebench=None) -> dict[str, Any]:
    """The run spec: the vendor's settings, every instance, the claim, and (unless `full`) the early stop once the
    claim's verdict is settled."""
    settings = preset.settings
    claim = preset.claim_config(arms[0]["name"])
    spec: dict[str, Any] = {
        "name": preset.name, "suite": str(suite), "preset": "leaf", "seeds": settings.seeds,
        "workers": settings.workers, "max_attempts": settings.max_attempts, "task_order_seed": settings.task_order_seed,
        "budgets": settings.budgets.model_dump(exclude_none=True),
        "sandbox": {"backend": backend, "images": str(images)}, "arms": arms, "claim": claim.model_dump(mode="json")}
    if swebench is not None and (chosen := swebench.model_dump(exclude_none=True)):
        spec["swebench"] = chosen  # the run names the instances' images as they were locked
    if not full:
        spec["decide"] = {"reaches": {"arm": claim.arm, "avg_at_k": claim.avg_at_k, "tolerance": claim.tolerance,
                                      "tasks": "seen"}, "alpha": claim.alpha}
    return spec


def _write_spec(spec: dict[str, Any], path: Path) -> None:
    import yaml

    from compare.spec import SpecError, parse_run_spec

    try:
        parse_run_spec(spec, source=str(path))
    except SpecError as exc:
        raise ReproduceError(str(exc)) from None
    _write_atomic(path, yaml.safe_dump(spec, sort_keys=False, allow_unicode=True, width=120))


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


# --- output and the run ------------------------------------------------------------------------------------------

def _print_presets(as_json: bool) -> None:
    from compare.claim_preset import PresetError, list_presets, preset_listing

    try:
        listed = [preset_listing(preset) for preset in list_presets()]
    except PresetError as exc:
        fail(str(exc), 2)
    if as_json:
        sys.stdout.write(json.dumps({"presets": listed}, indent=2) + "\n")
        return
    for entry in listed:
        pass_at = f", {_percent(entry['pass_at_k'])} Pass@{entry['k']}" if entry["pass_at_k"] is not None else ""
        typer.echo(f"{entry['name']}: {entry['title']}\n  {_percent(entry['avg_at_k'])} Avg@{entry['k']}{pass_at} on "
                   f"{entry['benchmark']} ({entry['instances'] or '?'} instances, {entry['dataset']} "
                   f"{entry['split']}); {entry['unconfirmed']} settings unconfirmed")


def _percent(share: float) -> str:
    return f"{share * 100:.1f} %"


def _print_prepared(prepared: Prepared, *, as_json: bool, run: bool) -> None:
    """What was written and what is unconfirmed: with --json (and no --run) the document on stdout; with --run
    --json stdout is the verdict's, so the lines go to stderr."""
    if as_json and not run:
        sys.stdout.write(json.dumps(prepared.document(), indent=2) + "\n")
        return
    from compare.display import clean

    claim = prepared.preset.claim
    pass_at = f", {_percent(claim.pass_at_k)} Pass@{claim.k}" if claim.pass_at_k is not None else ""
    fresh = f" + {prepared.fresh_tasks} fresh" if prepared.fresh_tasks else ""
    lines = [f"wrote {prepared.spec_path} ({claim.benchmark}: {prepared.benchmark_tasks} instances{fresh}; arms: "
             f"{', '.join(prepared.arms)}), {prepared.suite_path}, {prepared.images_path}",
             *_source_lines(prepared.dataset_source),
             f"claim: {_percent(claim.avg_at_k)} Avg@{claim.k}{pass_at} by {prepared.claim_arm}; "
             + ("the run stops once the verdict is settled (--full runs every instance)" if prepared.early_stop
                else "every instance runs (--full)"),
             "unconfirmed (neither the vendor's publications nor Leaf's code state these):",
             *(f"  - {item}" for item in prepared.preset.unconfirmed)]
    if not run:
        lines.append(f"run it: leafcost run {prepared.spec_path} (or add --run)")
    for line in lines:
        typer.echo(clean(line), err=as_json)


def _dataset_source(dataset: Path) -> dict[str, Any] | None:
    """Where --dataset's rows came from, as `leafcost swebench export` recorded it beside them (ROWS.source.json),
    and whether the rows are still the ones it wrote (rows_match); None when there is no such record."""
    import hashlib

    from pydantic import ValidationError

    from sandbox.swebench_dataset import ExportSource, source_path

    recorded = source_path(dataset)
    if not recorded.is_file():
        return None
    try:
        source = ExportSource.model_validate_json(recorded.read_bytes())
    except (ValidationError, OSError) as exc:
        raise ReproduceError(f"--dataset {dataset}: {recorded.name} beside it is not an export record "
                             f"({str(exc).splitlines()[0]}): remove it or export the rows again") from None
    return {"dataset": source.name, "split": source.split, "revision": source.revision, "commit": source.commit,
            "rows": source.rows, "rows_match": hashlib.sha256(dataset.read_bytes()).hexdigest() == source.rows_sha256,
            "record": str(recorded)}


def _source_lines(source: dict[str, Any] | None) -> list[str]:
    if source is None:
        return []
    at = source["commit"] or source["revision"]
    line = f"dataset: {source['dataset']}" + (f" ({source['split']})" if source["split"] else "") + (
        f" at {at}" if at else "") + f", {source['rows']} rows when exported ({source['record']})"
    if not source["rows_match"]:
        line += "; the rows differ from the export's: they were changed after it"
    return [line]


def _run_claim(prepared: Prepared, db: Path | None, as_json: bool) -> int:
    """Runs the written spec as `leafcost run` does, then prints the claim's verdict; the exit code."""
    from compare.cli import run_spec
    from compare.planning import plan_for_run, round_cost_problem
    from compare.spec import SpecError, load_run_spec

    try:
        spec = load_run_spec(prepared.spec_path)
    except SpecError as exc:
        fail(str(exc), 2)
    planned = plan_for_run(spec, db, record=True)
    if (problem := round_cost_problem(spec, planned)) is not None:
        fail(f"{prepared.spec_path}: {problem}", 2)
    quiet = redirect_stdout(io.StringIO()) if as_json else nullcontext()  # --json: stdout is the verdict's alone
    with quiet:
        summary = run_spec(spec, db, resume=None, as_json=as_json, rerun=f"leafcost run {prepared.spec_path}",
                            plan=planned.model_dump(mode="json") if planned is not None else None)
    _print_verdict(summary, as_json)
    return 0 if summary.status == "finished" else 1


def _print_verdict(summary, as_json: bool) -> None:
    from compare.claim import print_claim
    from compare.cli import claim_of_run

    document = claim_of_run(Path(summary.db), summary.run_id)
    if document is None:
        fail(f"run {summary.run_id} has no claim: nothing to judge", 2)
    if as_json:
        sys.stdout.write(document.model_dump_json(indent=2) + "\n")
    else:
        print_claim(document)
