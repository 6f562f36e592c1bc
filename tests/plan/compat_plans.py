"""Plans whose checkpoints a release wrote and later releases must still resume (tests/plan/test_plan_durable_compat.py).

The targets are module-level functions: a checkpoint's fingerprint hashes their module and qualified names, so
moving or renaming one here makes the stored documents in the test refer to another plan.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from routegate.plan import Plan, Step, Store, from_parallel_all, interrupt, when

KEY = "compat-1"


class Claim(BaseModel):
    amount: int


class Count(BaseModel):
    n: int


def classify(raw: Any) -> Claim:
    return Claim(amount=int(raw))


def refund(claim: Claim) -> str:
    answer = interrupt({"approve_refund": claim.amount})
    return f"refunded {claim.amount}" if answer == "yes" else "declined"


def reject(claim: Claim) -> str:
    return "rejected"


def notify(outcome: str) -> str:
    return f"notified: {outcome}"


def refund_plan(store: Store) -> Plan:
    """classify → refund (asks a person) | reject → notify; the branch's rejoin is pending while refund asks."""
    return Plan(
        Step(
            classify,
            output=Claim,
            writes="claim",
            routes={"refund": when.field("amount").greater_than(0), "reject": when.field("amount").less_than(1)},
            after_branches="notify",
        ),
        Step(refund, output=str),
        Step(reject, output=str),
        Step(notify, output=str),
        store=store,
        checkpoint_key=KEY,
    )


def start(raw: Any) -> Count:
    return Count(n=int(raw))


def inc(c: Count) -> Count:
    return Count(n=c.n + 1)


def left(c: Count) -> str:
    return f"left:{c.n}"


def right(c: Count) -> str:
    return f"right:{c.n}"


def join(parts: dict[str, str]) -> str:
    return " + ".join(f"{k}={v}" for k, v in sorted(parts.items()))


def loop_plan(store: Store) -> Plan:
    """start → inc (loops to itself while n < 3) → a parallel band left | right → join."""
    return Plan(
        Step(start, output=Count),
        Step(inc, output=Count, routes={"inc": when.field("n").less_than(3)}),
        Step(left, output=str, parallel=True),
        Step(right, output=str, parallel=True),
        Step(join, output=str, context=from_parallel_all("left")),
        store=store,
        checkpoint_key=KEY,
    )


def tick(c: Count) -> Count:
    """The step of :func:`ticking_plan`; it kills its process when about to count past ``COMPAT_CRASH_AT`` (set
    only by tests/plan/make_compat_stores.py, to leave a run stored as running, as a crash does)."""
    import os

    if os.environ.get("COMPAT_CRASH_AT") == str(c.n):
        os._exit(1)
    return Count(n=c.n + 1)


def ticking_plan(store: Store) -> Plan:
    """start → tick (loops to itself while n < 6) → notify-like end (``left``)."""
    return Plan(
        Step(start, output=Count),
        Step(tick, output=Count, routes={"tick": when.field("n").less_than(6)}),
        Step(left, output=str),
        store=store,
        checkpoint_key=KEY,
    )
