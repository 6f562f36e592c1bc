"""Plans for the crash tests: run in a child process by ``run_child`` (tests/plan/test_plan_durable.py).

Every step appends its idempotency key to the side-effect log (``LOG``) once it has done its work; the step named
by ``CRASH_AT`` (``name`` or ``name@n``: on the n-th payload ``n``) kills the process with ``os._exit(1)`` first.
"""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel

from routegate.plan import Plan, Step, Store, interrupt, step_key, when


class Count(BaseModel):
    n: int
    seen: list[str] = []


def _effect(name: str, n: int | None = None) -> None:
    crash = os.environ.get("CRASH_AT", "")
    if crash == name or (n is not None and crash == f"{name}@{n}"):
        os._exit(1)
    with open(os.environ["LOG"], "a", encoding="utf-8") as log:
        log.write(f"{step_key() or name}\n")


def _add(name: str):  # a step that appends its name to the payload's list
    def step(c: Count) -> Count:
        _effect(name)
        return Count(n=c.n, seen=[*c.seen, name])

    step.__name__ = step.__qualname__ = name
    return step


start = Step(lambda x: Count(n=int(x)), name="start", output=Count)


def linear() -> Plan:
    return Plan(start, *(Step(_add(n), output=Count) for n in ("a", "b", "c", "d")), **_durable())


def branch() -> Plan:
    return Plan(
        start,
        Step(
            _add("classify"),
            output=Count,
            routes={"left": when.field("n").greater_than(0), "right": when.field("n").less_than(1)},
            after_branches="join",
        ),
        Step(_add("left"), output=Count),
        Step(_add("right"), output=Count),
        Step(_add("join"), output=Count),
        **_durable(),
    )


def inc(c: Count) -> Count:
    _effect("inc", c.n)
    return Count(n=c.n + 1, seen=[*c.seen, f"inc{c.n}"])


def loop() -> Plan:
    return Plan(
        start,
        Step(inc, output=Count, routes={"inc": when.field("n").less_than(4)}),
        Step(_add("done"), output=Count),
        **_durable(),
    )


def _member(name: str):
    def member(c: Count) -> str:
        _effect(name)
        return f"{name}:{c.n}"

    member.__name__ = member.__qualname__ = name
    return member


def band() -> Plan:
    return Plan(
        start,
        Step(_member("p1"), parallel=True),
        Step(_member("p2"), parallel=True),
        Step(_member("p3"), parallel=True),
        Step(lambda joined: sorted(joined.values()), name="gather"),
        **_durable(),
    )


def ask(c: Count) -> Count:
    answer = interrupt(f"approve {c.n}?")
    _effect("ask")
    return Count(n=c.n, seen=[*c.seen, f"ask:{answer}"])


def approval() -> Plan:
    return Plan(
        start, Step(_add("a"), output=Count), Step(ask, output=Count), Step(_add("b"), output=Count), **_durable()
    )


def _durable() -> dict[str, object]:
    return {"store": Store(db=os.environ["DB"]), "checkpoint_key": os.environ.get("KEY", "job-1")}


def hold(c: Count) -> Count:
    """Tell the parent the run is live, then wait for it to close our stdin."""
    print("ready", flush=True)
    sys.stdin.readline()
    return Count(n=c.n, seen=[*c.seen, "hold"])


def holding() -> Plan:
    return Plan(start, Step(hold, output=Count), **_durable())


PLANS = {"holding": holding, "linear": linear, "branch": branch, "loop": loop, "band": band, "approval": approval}

if __name__ == "__main__":  # python durable_plans.py PLAN INPUT [ANSWER]
    plan = PLANS[sys.argv[1]]()
    kwargs = {"answer": sys.argv[3]} if len(sys.argv) > 3 else {}
    result = plan.run(sys.argv[2], **kwargs)
    payload = result.payload.model_dump() if isinstance(result.payload, BaseModel) else result.payload
    print(repr((result.stop_reason, list(result.path), payload)))
