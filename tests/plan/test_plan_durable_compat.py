"""Checkpoints written by an earlier release resume: the documents below were written by routegate before the run's
position became an object (issue 24), byte for byte as its checkpoint store held them. A change to the checkpoint
format, to the fingerprint of a plan or to how a run is restored makes these fail — the document must either
resume into the step it names or be refused with a message naming the format."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from routegate.plan import CheckpointMismatchError, Store


def _plans() -> ModuleType:
    # loaded under its own top-level name: a checkpoint's fingerprint hashes the targets' module names
    name = "compat_plans"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("compat_plans.py"))
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


cp = _plans()

PAUSED: dict[str, Any] = json.loads(
    r"""{"state": {"allowance": 0, "answers": {"compat-1/2/refund": []}, "asked": "compat-1/2/refund", "at": 1, "band": {}, "decisions": [["refund", "when.field('amount').greater_than(0)"]], "envelopes": [{"ms": 0.033, "p": {"amount": 250}, "s": "classify"}], "fingerprint": "3468db5e703f663c75fb4b5aaa644b7f", "format": 2, "input": 250, "iterations": 1, "next": "refund", "prev": {"v": {"amount": 250}}, "rejoin": 0, "result": {"decisions": [["refund", "when.field('amount').greater_than(0)"], [null, "interrupted"]], "elapsed_ms": 4.446, "envelopes": [{"ms": 0.033, "p": {"amount": 250}, "s": "classify"}, {"e": {"key": "compat-1/2/refund", "message": "interrupted: {'approve_refund': 250}", "phase": "step", "question": {"approve_refund": 250}, "stop_reason": "interrupted", "type": "Interrupt"}, "ms": 0.027, "p": null, "s": "refund"}], "error": {"key": "compat-1/2/refund", "message": "interrupted: {'approve_refund': 250}", "phase": "step", "question": {"approve_refund": 250}, "stop_reason": "interrupted", "type": "Interrupt"}, "payload": null, "stop_reason": "interrupted"}, "store": {"claim": {"amount": 250}}}, "status": "interrupted", "stop_reason": "interrupted"}"""
)
"""refund_plan(…).run(250): paused on refund's question, the rejoin at notify pending, the claim in the store."""

MID_BAND: dict[str, Any] = json.loads(
    r"""{"allowance": 0, "answers": {}, "at": 2, "band": {"left": {"ms": 0.01, "p": "left:3", "s": "left"}}, "decisions": [[null, "linear"], ["inc", "when.field('n').less_than(3)"], [null, "no route matched; linear"]], "envelopes": [{"ms": 0.008, "p": {"n": 1}, "s": "start"}, {"ms": 0.003, "p": {"n": 2}, "s": "inc"}, {"ms": 0.002, "p": {"n": 3}, "s": "inc"}], "fingerprint": "9fdb87eb153d137cd549e5c0b3d57e87", "format": 2, "input": 1, "iterations": 3, "next": "left", "prev": {"v": {"n": 3}}, "rejoin": -1, "store": {}}"""
)
"""loop_plan(…).run(1) as it stood when the process died inside the parallel band: left finished, right not."""


def _stored(status: str, stop_reason: str, state: dict[str, Any]) -> Store:
    store = Store()
    store.checkpoints.save(cp.KEY, status, stop_reason, copy.deepcopy(state))
    return store


def test_a_paused_run_written_before_resumes_with_its_answer_into_the_step_that_asked() -> None:
    store = _stored(PAUSED["status"], PAUSED["stop_reason"], PAUSED["state"])
    result = cp.refund_plan(store).run(answer="yes")
    assert (result.ok, result.stop_reason) == (True, "success")
    assert result.output == "notified: refunded 250"
    assert result.path == ("classify", "refund", "notify")  # the pending rejoin was restored
    assert store["claim"] == cp.Claim(amount=250)  # the store's write came back through output=


def test_a_crashed_run_written_before_resumes_inside_its_band_without_rerunning_the_finished_member() -> None:
    store = _stored("running", "", MID_BAND)
    result = cp.loop_plan(store).run()
    assert (result.ok, result.stop_reason) == (True, "success")
    assert result.output == "left=left:3 + right=right:3"
    assert result.path == ("start", "inc", "inc", "left", "right", "join")
    left = next(env for env in result.envelopes if env.step == "left")
    assert left.elapsed_ms == MID_BAND["band"]["left"]["ms"]  # restored from the checkpoint, not run again
    assert store.checkpoints.load(cp.KEY) is not None


def test_a_checkpoint_of_an_unknown_format_is_refused_naming_the_format() -> None:
    state = copy.deepcopy(PAUSED["state"])
    state["format"] = 99
    store = _stored(PAUSED["status"], PAUSED["stop_reason"], state)
    with pytest.raises(CheckpointMismatchError, match=r"has format 99; this routegate reads formats 1, 2"):
        cp.refund_plan(store).run(answer="yes")


def test_a_resumed_run_still_reads_a_step_that_ran_before_the_pause() -> None:
    from routegate.plan import Plan, Step, from_step, interrupt

    def ask(order: str) -> str:
        return f"{order} approved by {interrupt('approve?')}"

    def receipt(order: str) -> str:  # reads the first step, not the previous one
        return f"receipt for {order}"

    store = Store()
    plan = Plan(
        Step(str.upper, name="order"),
        Step(ask, name="ask"),
        Step(receipt, name="receipt", context=from_step("order")),
        store=store,
        checkpoint_key="restored-path",
    )
    assert plan.run("a-1").stop_reason == "interrupted"
    resumed = plan.run(answer="ann")
    assert (resumed.ok, resumed.output) == (True, "receipt for A-1")
    assert resumed.path == ("order", "ask", "receipt")
