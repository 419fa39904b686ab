"""`leafcost plan`'s terminal output: the plan document (compare.planning) as a table of arms, then a line each for
the arms' notes, the comparison, the Monte Carlo and the target."""

from __future__ import annotations

from compare.arm_table import counted, figure_label, fmt_usd
from compare.planning import PlanDocument, TargetPlan


def print_plan(document: PlanDocument) -> None:
    """The plan as `leafcost plan` prints it: one row per arm, then the comparison, the Monte Carlo and the
    target, each as lines (the JSON document has every figure)."""
    from rich.table import Table

    from compare.display import shown, terminal

    console = terminal()
    table = Table(title=f"leafcost plan {shown(document.spec)}: {counted(document.tasks or 0, 'task')} × "
                        f"{counted(document.seeds, 'seed')}")
    for column in ("arm", "source", "episodes", "resolve", "$", "Avg@k ±", "$/resolved ±"):
        table.add_column(column, overflow="fold")
    for arm in document.arms:
        table.add_row(shown(arm.arm), shown(arm.source or "no estimate"), f"{arm.episodes:,}",
                      _share(arm.resolve_rate), _dollars(arm.usd.get("total"), arm.usd_relative_se),
                      _half(arm.widths.get("avg_at_k")), _half_usd(arm.widths.get("cost_per_resolved_attempt")))
    console.print(table)
    if document.tasks_note:
        console.print(shown(document.tasks_note))
    hours = (document.wall_seconds or 0) / 3600
    console.print(f"{counted(document.episodes or 0, 'episode')}, {hours:.1f} h at {document.workers} workers, "
                  f"{fmt_usd(document.usd)} in all" + (f" but {', '.join(document.usd_leaves_out)}"
                                                        if document.usd_leaves_out else ""))
    for line in _lines(document):
        console.print(shown(line))


def _lines(document: PlanDocument) -> list[str]:
    lines = []
    for arm in document.arms:
        lines.extend(f"{arm.arm}: {note}" for note in ([arm.no_estimate] if arm.no_estimate else arm.notes))
    if document.comparison is not None:
        c = document.comparison
        widths = c.widths
        lines.append(f"{c.arms[0]} − {c.arms[1]} ({'paired' if c.paired else 'independent'}): "
                     f"{figure_label('avg_at_k')} ±{_half(widths['avg_at_k_difference'])}, cost per resolved "
                     f"attempt ±{_half_usd(widths['cost_per_resolved_difference'])}")
    if document.decide is not None:
        d = document.decide
        lines.append(f"decide ({d.simulations} simulated runs, rounds of {d.round_tasks} tasks): decided before the "
                     f"budget in {d.decided_probability:.0%}; tasks {d.tasks.p10:.0f}/{d.tasks.p50:.0f}/"
                     f"{d.tasks.p90:.0f} (p10/p50/p90), {fmt_usd(d.usd.p10)}/{fmt_usd(d.usd.p50)}/"
                     f"{fmt_usd(d.usd.p90)}")
        for question, shares in d.verdicts.items():
            lines.append(f"  {question}: " + ", ".join(f"{verdict} {_percent(share)}" for verdict, share in
                                                       sorted(shares.items(), key=lambda item: -item[1])))
    if document.target is not None:
        lines.extend(_target_lines(document.target))
    return lines


def _target_lines(target: TargetPlan) -> list[str]:
    if target.target == "decide":
        if target.tasks is None:
            return [f"--target decide: {target.note}"]
        return [f"--target decide: {target.tasks} tasks decide it in {target.probability:.0%} of simulated runs: "
                f"{target.episodes:,} episodes, {fmt_usd(target.usd)}"]
    lines = []
    for arm, row in target.arms.items():
        if row["tasks"] is None:
            lines.append(f"--target {target.target}: {arm}: {row['note']}")
            continue
        verdict = "" if row["reachable"] else " (not reachable)"
        lines.append(f"--target {target.target}: {arm}: {row['tasks']} tasks × {row['seeds']} seeds{verdict}, "
                     f"{fmt_usd(row['usd'])}" + (f": {row['note']}" if row["note"] else ""))
    return lines


def _percent(share: float) -> str:
    return "<1%" if 0 < share < 0.01 else f"{share:.0%}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _half(width: float | None) -> str:
    return "n/a" if width is None else f"{width / 2:.3f}"


def _half_usd(width: float | None) -> str:
    return fmt_usd(None if width is None else width / 2)


def _dollars(usd: float | None, relative_se: float | None) -> str:
    """"$5.25 ±22 %": the plan's dollars and their standard error, when the source was measured."""
    return fmt_usd(usd) + (f" ±{relative_se * 100:.0f} %" if usd is not None and relative_se is not None else "")
