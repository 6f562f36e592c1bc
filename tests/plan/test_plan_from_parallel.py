"""``from_parallel(name)`` / ``from_parallel_all(name)``: reading a parallel band's outputs from a later step."""

from __future__ import annotations

import pytest

from routegate.plan import Plan, PlanCompileError, Step, Store, from_parallel, from_parallel_all, when


def band_plan(**kw: object) -> Plan:
    return Plan(
        Step(lambda q: q.upper(), name="normalise"),
        Step(lambda q: f"web:{q}", name="web", parallel=True),
        Step(lambda q: f"docs:{q}", name="docs", parallel=True),
        Step(lambda joined: len(joined), name="count"),
        Step(lambda hits: hits, name="all", context=from_parallel_all("web")),
        Step(lambda hit: hit, name="one", context=from_parallel("docs")),
        **kw,  # type: ignore[arg-type]
    )


def test_a_later_step_reads_the_whole_band_or_one_member() -> None:
    result = band_plan().run("q")
    assert result.envelope("all").payload == {"web": "web:Q", "docs": "docs:Q"}
    assert result.output == "docs:Q"


def test_a_durable_resume_rebuilds_the_band_outputs(tmp_path: object) -> None:
    store = Store()
    failed = []

    def flaky(hits: dict[str, str]) -> list[str]:
        if not failed:
            failed.append(1)
            raise RuntimeError("once")
        return sorted(hits.values())

    plan = Plan(
        Step(lambda q: q, name="start"),
        Step(lambda q: f"a:{q}", name="a", parallel=True),
        Step(lambda q: f"b:{q}", name="b", parallel=True),
        Step(lambda joined: joined, name="next"),
        Step(flaky, context=from_parallel_all("a")),
        store=store,
        checkpoint_key="band",
    )
    assert plan.run("x").stop_reason == "step_error:RuntimeError"
    resumed = plan.run()
    assert resumed.ok and resumed.output == ["a:x", "b:x"]


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            [Step(lambda x: x, name="a"), Step(lambda x: x, name="b", context=from_parallel("a"))],
            "not parallel=True; use from_step('a')",
        ),
        (
            [
                Step(lambda x: x, name="a", parallel=True),
                Step(lambda x: x, name="b", parallel=True),
                Step(lambda x: x, name="c", context=from_parallel_all("b")),
            ],
            "must name the first step of a parallel band; the band starts at 'a'",
        ),
        (
            [Step(lambda x: x, name="a"), Step(lambda x: x, name="c", context=from_parallel_all("a"))],
            "(it is not parallel=True)",
        ),
        (
            [Step(lambda x: x, name="c", context=from_parallel_all("zz"))],
            "from_parallel_all('zz') names an unknown step",
        ),
    ],
)
def test_wrong_band_references_fail_when_the_plan_is_built(steps: list[Step], message: str) -> None:
    with pytest.raises(PlanCompileError) as caught:
        Plan(*steps)
    assert message in str(caught.value)


def test_a_band_that_routing_skipped_is_a_clear_runtime_error() -> None:
    plan = Plan(
        Step(lambda x: x, name="gate", routes={"after": when.payload(lambda v: v == "skip")}),
        Step(lambda x: x, name="p", parallel=True),
        Step(lambda x: x, name="q", parallel=True),
        Step(lambda x: x, name="after", context=from_parallel_all("p")),
    )
    from routegate.plan import PlanRuntimeError

    with pytest.raises(PlanRuntimeError, match="band has not run"):
        plan.run("skip")


def test_the_sentinels_refuse_a_bad_name() -> None:
    with pytest.raises(PlanCompileError, match="from_parallel\\(\\) takes a step name"):
        from_parallel("")
    with pytest.raises(PlanCompileError, match="from_parallel_all\\(\\) takes a step name"):
        from_parallel_all(3)  # type: ignore[arg-type]
