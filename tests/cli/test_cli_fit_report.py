"""``routegate fit`` ends with a few lines a person reads: where the router is, what calibration achieved (the
out-of-scope recall and the clarify rate when there are any), an objective it could not meet, the fine-tune's
choice; ``--json`` prints the whole summary instead (``tests/configured/test_desk_fit.py`` runs both)."""

from __future__ import annotations

from typing import Any

from routegate.cli._fit_report import fit_lines


def _summary(**calibration: Any) -> dict[str, Any]:
    cal = {
        "threshold": 1.0896807,
        "clarify_margin": 0.0,
        "source": "5-fold cross-validation on train",
        "examples": 84,
        "in_scope_accuracy": 0.9166666,
        "oos_recall": None,
        "coverage": 0.9761904,
        "clarify_rate": 0.0,
        "feasible": True,
    }
    return {"router": "gym/router", "routes": 4, "fit_seconds": 12.2, "calibration": {**cal, **calibration}}


def test_a_fit_says_where_the_router_is_and_what_calibration_achieved() -> None:
    assert fit_lines(_summary()) == [
        "saved gym/router: 4 routes, fitted in 12.2 s",
        "calibrated on 5-fold cross-validation on train (84 examples): in-scope accuracy 91.7 %, in-scope routed "
        "97.6 %; threshold 1.090",
        "(--json prints every figure of the calibration)",
    ]


def test_out_of_scope_recall_clarify_and_an_objective_not_met_are_said() -> None:
    lines = fit_lines(_summary(oos_recall=0.85, clarify_margin=0.1, clarify_rate=0.031, feasible=False, source="val"))
    assert lines[1] == (
        "calibrated on val (84 examples): in-scope accuracy 91.7 %, OOS recall 85.0 %, in-scope routed 97.6 %, "
        "clarify 3.1 %; threshold 1.090"
    )
    assert lines[2] == "the objective could not be met on this data: the threshold closest to it is kept"


def test_the_fine_tunes_choice_is_said() -> None:
    chosen = {"objective": "contrastive", "learning_rate": 5e-05, "epochs": 1.0}
    sweep = {"chosen": chosen, "finetuned": True, "candidates": 2, "stopped_by_budget": False, "seconds": 61.3}
    assert fit_lines({**_summary(), "finetune": sweep})[2] == (
        "fine-tune: 2 candidates in 61.3 s, chose fine-tuned (contrastive, lr 5e-05, 1 epoch)"
    )
    shipped = {**sweep, "finetuned": False, "stopped_by_budget": True}
    assert fit_lines({**_summary(), "finetune": shipped})[2] == (
        "fine-tune: 2 candidates in 61.3 s, chose the encoder as shipped (no fine-tuned one did better on --val); "
        "stopped by --max-minutes"
    )
