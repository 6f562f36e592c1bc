"""What ``routegate fit`` prints when it is done: a few lines a person reads (where the router is, what calibration
achieved), or with ``--json`` the whole summary as one JSON object (the calibration's every field)."""

from __future__ import annotations

from typing import Any


def _percent(value: float | None) -> str | None:
    return None if value is None else f"{100 * value:.1f} %"


def fit_lines(summary: dict[str, Any]) -> list[str]:
    """The short report of ``summary`` (what ``--json`` prints whole)."""
    cal = summary["calibration"]
    lines = [f"saved {summary['router']}: {summary['routes']} routes, fitted in {summary['fit_seconds']:g} s"]
    achieved = [
        f"{label} {figure}"
        for label, figure in (
            ("in-scope accuracy", _percent(cal.get("in_scope_accuracy"))),
            ("OOS recall", _percent(cal.get("oos_recall"))),
            ("in-scope routed", _percent(cal.get("coverage"))),
            ("clarify", _percent(cal.get("clarify_rate")) if cal.get("clarify_margin") else None),
        )
        if figure is not None
    ]
    lines.append(
        f"calibrated on {cal['source']} ({cal['examples']} examples): {', '.join(achieved) or 'no figures'}; "
        f"threshold {cal['threshold']:.3f}"
    )
    if not cal.get("feasible", True):
        lines.append("the objective could not be met on this data: the threshold closest to it is kept")
    sweep = summary.get("finetune")
    if sweep is not None:
        chosen = sweep["chosen"]
        encoder = (
            f"fine-tuned ({chosen['objective']}, lr {chosen['learning_rate']:g}, {chosen['epochs']:g} "
            f"epoch{'' if chosen['epochs'] == 1 else 's'})"
            if sweep["finetuned"]
            else "the encoder as shipped (no fine-tuned one did better on --val)"
        )
        budget = "; stopped by --max-minutes" if sweep["stopped_by_budget"] else ""
        lines.append(f"fine-tune: {sweep['candidates']} candidates in {sweep['seconds']:g} s, chose {encoder}{budget}")
    lines.append("(--json prints every figure of the calibration)")
    return lines
