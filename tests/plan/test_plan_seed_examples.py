"""The seed's five routing examples, with deterministic Python targets in place of the LLM agents, produce the
execution shapes the seed states."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from routegate.plan import MaxIterationsExceeded, Plan, Step, Store, from_prev, from_start, from_step, when


# -- 1) Form A (predicate map): empty-search early-out via the when DSL -------------------------------------------
class Hits(BaseModel):
    items: list[str]


def make_search(items: list[str]) -> Any:
    def search(query: str) -> dict[str, Any]:
        return {"items": items}

    return search


def example_1(items: list[str]) -> Plan:
    return Plan(
        Step(
            "search",
            output=Hits,
            routes={
                "apology": when.field("items").empty(),
                "write": when.field("items").not_empty(),
            },
            after_branches="log_outcome",
        ),
        Step("write", task="Write a 200-word brief from the search hits."),
        Step("apology", task="Apologise; suggest broader terms."),
        Step("log_outcome", task="Emit one line of metrics for this run."),
        targets={
            "search": make_search(items),
            "write": lambda hits: f"brief on {', '.join(hits.items)}",
            "apology": lambda hits: "sorry: no hits, try broader terms",
            "log_outcome": lambda text: f"logged: {text}",
        },
    )


def test_example_1_empty_hits_go_search_apology_log_outcome() -> None:
    result = example_1([]).run("quantum gravity in 1820")
    assert result.ok
    assert result.path == ("search", "apology", "log_outcome")
    assert result.output == "logged: sorry: no hits, try broader terms"
    assert isinstance(result.envelope("search").payload, Hits)


def test_example_1_some_hits_go_search_write_log_outcome() -> None:
    result = example_1(["a", "b"]).run("routing")
    assert result.path == ("search", "write", "log_outcome")
    assert result.output == "logged: brief on a, b"


async def test_example_1_async_gives_the_same_shapes() -> None:
    assert (await example_1([]).arun("q")).path == ("search", "apology", "log_outcome")
    assert (await example_1(["x"]).arun("q")).path == ("search", "write", "log_outcome")


# -- 2) Form B (routes_by): LLM-decided triage with exclusive branching --------------------------------------------
class Triage(BaseModel):
    summary: str
    severity: Literal["urgent", "normal", "spam"] | None = None


def example_2(severity: str | None) -> Plan:
    def classify(ticket: str) -> Triage:
        return Triage(summary=ticket[:20], severity=severity)  # type: ignore[arg-type]

    return Plan(
        Step(classify, name="classify", output=Triage, routes_by="severity", after_branches="archive"),
        Step(lambda t: "P0 opened", name="urgent", task="Page on-call; open P0."),
        Step(lambda t: "in backlog", name="normal", task="Add to support backlog."),
        Step(lambda t: "closed", name="spam", task="Close as spam."),
        Step(lambda outcome: f"archived: {outcome}", name="archive", task="Log to the audit archive."),
    )


@pytest.mark.parametrize(
    ("severity", "path", "payload"),
    [
        ("urgent", ("classify", "urgent", "archive"), "archived: P0 opened"),
        ("normal", ("classify", "normal", "archive"), "archived: in backlog"),
        ("spam", ("classify", "spam", "archive"), "archived: closed"),
    ],
)
def test_example_2_each_severity_runs_only_its_branch_then_archive(
    severity: str, path: tuple[str, ...], payload: str
) -> None:
    result = example_2(severity).run("the site is down!")
    assert result.path == path
    assert result.output == payload
    assert result.trace[0].why == f"routes_by severity={severity!r}"
    assert result.trace[0].next == severity


def test_example_2_severity_none_means_do_not_route_linear_progression() -> None:
    result = example_2(None).run("hello")
    assert result.path == ("classify", "urgent", "normal", "spam", "archive")
    assert result.trace[0].next is None
    assert result.trace[0].why == "routes_by severity=None; linear"


# -- 3) Self-correction loop: route back when the reviewer rejects -------------------------------------------------
class Verdict(BaseModel):
    feedback: str
    approved: bool


def example_3(approve_on_review: int, *, max_iterations: int = 8) -> tuple[Plan, Store, list[str]]:
    store = Store()
    seen: list[str] = []

    def write(question: str) -> str:
        verdict = store.read("verdict")
        seen.append(question)
        if verdict is None:
            return f"draft 1 for {question}"
        return f"draft {len(seen)} addressing {verdict.feedback!r}"

    reviews = {"count": 0}

    def review(draft: str) -> Verdict:
        reviews["count"] += 1
        approved = reviews["count"] >= approve_on_review
        return Verdict(feedback="ok" if approved else f"too vague (review {reviews['count']})", approved=approved)

    plan = Plan(
        Step(
            write,
            task="Draft a 200-word answer; if a 'verdict' is in the store, rewrite addressing the feedback.",
            context=from_start,
            sources=[store],
            writes="draft",
        ),
        Step(
            review,
            task="Score the draft; approved=True only if accuracy + tone + length all pass.",
            context=from_prev,
            output=Verdict,
            writes="verdict",
            routes={"write": when.field("approved").is_(False)},
        ),
        Step(lambda draft: f"published: {draft}", name="publish", context=from_step("write")),
        max_iterations=max_iterations,
        store=store,
    )
    return plan, store, seen


def test_example_3_loops_back_until_the_reviewer_approves() -> None:
    plan, store, seen = example_3(approve_on_review=3)
    result = plan.run("what is a plan?")
    assert result.path == ("write", "review", "write", "review", "write", "review", "publish")
    assert seen == ["what is a plan?"] * 3  # context=from_start: every rewrite sees the question
    assert result.output == "published: draft 3 addressing 'too vague (review 2)'"
    assert store["draft"] == "draft 3 addressing 'too vague (review 2)'"
    assert store["verdict"].approved is True
    assert [entry.next for entry in result.trace if entry.target == "review"] == ["write", "write", None]


def test_example_3_an_infinite_rejection_stops_at_max_iterations() -> None:
    plan, _, _ = example_3(approve_on_review=10**9, max_iterations=8)
    result = plan.run("q")
    assert (result.ok, result.stop_reason, result.phase) == (False, "max_iterations", "step")
    assert result.path == ("write", "review") * 4 and result.output is None
    with pytest.raises(MaxIterationsExceeded) as caught:
        result.raise_for_stop()
    assert caught.value.limit == 8
    assert caught.value.path == ("write", "review") * 4
    assert "max_iterations=8" in str(caught.value)
    assert "write → review" in str(caught.value)


# -- 4) Lambda escape hatch: still covers BOTH branches and uses after_branches --------------------------------------
def example_4(items: list[str]) -> Plan:
    return Plan(
        Step(
            make_search(items),
            name="classify",
            output=Hits,
            routes={
                "apology": lambda env: not env.payload.items,
                "rank": lambda env: bool(env.payload.items),
            },
            after_branches="log_outcome",
        ),
        Step(lambda hits: sorted(hits.items), name="rank", task="Rank the search hits."),
        Step(lambda hits: "sorry", name="apology", task="Apologise; suggest broader terms."),
        Step(lambda out: {"metrics": out}, name="log_outcome", task="Emit metrics."),
    )


def test_example_4_lambda_predicates_route_exclusively() -> None:
    ranked = example_4(["b", "a"]).run("q")
    assert ranked.path == ("classify", "rank", "log_outcome")
    assert ranked.output == {"metrics": ["a", "b"]}
    assert ranked.trace[0].why == "<lambda>"
    assert example_4([]).run("q").path == ("classify", "apology", "log_outcome")


# -- 5) Custom predicate functions for multi-field combinators, with their complement -------------------------------
class Score(BaseModel):
    score: float
    topic: str


def needs_review(env: Any) -> bool:
    """Route to review when the score is low AND the topic is sensitive."""
    return bool(env.payload.score < 0.5 and env.payload.topic in {"medical", "legal"})


def safe_to_auto(env: Any) -> bool:
    """Catch-all complement of needs_review."""
    return not needs_review(env)


def example_5(score: float, topic: str) -> Plan:
    def score_classifier(text: str) -> Score:
        return Score(score=score, topic=topic)

    return Plan(
        Step(
            "classify",
            routes={"review": needs_review, "auto": safe_to_auto},
            after_branches="audit",
        ),
        Step("auto"),
        Step("review"),
        Step("audit"),  # rejoin terminal — always runs
        targets={
            "classify": score_classifier,
            "auto": lambda s: "auto-approved",
            "review": lambda s: "sent to human review",
            "audit": lambda decision: f"audited: {decision}",
        },
    )


@pytest.mark.parametrize(
    ("score", "topic", "path"),
    [
        (0.2, "medical", ("classify", "review", "audit")),
        (0.2, "legal", ("classify", "review", "audit")),
        (0.9, "medical", ("classify", "auto", "audit")),
        (0.2, "sports", ("classify", "auto", "audit")),
    ],
)
def test_example_5_custom_predicates_with_their_complement(score: float, topic: str, path: tuple[str, ...]) -> None:
    result = example_5(score, topic).run("text")
    assert result.path == path
    assert result.trace[0].why == ("needs_review" if path[1] == "review" else "safe_to_auto")
    assert result.output.startswith("audited: ")
