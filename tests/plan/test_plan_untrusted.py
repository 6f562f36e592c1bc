"""Model output is untrusted: whatever a model (or an unvalidated target) returns, non-strict predicates answer
True or False without raising, and an LLM-routed plan either takes a declared route, falls through linearly, or
ends on a failed step — it never raises and never goes anywhere undeclared."""

from __future__ import annotations

import json
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from routegate.plan import Envelope, Plan, Step, when

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
FIELDS = st.sampled_from(["items", "severity", "score", "approved", "x"])


def verbs(name: str) -> list[Any]:
    field = when.field(name)
    return [
        field.empty(),
        field.not_empty(),
        field.equals("urgent"),
        field.not_equals("spam"),
        field.is_(True),
        field.in_({"a", "b"}),
        field.not_in_([["unhashable"]]),
        field.greater_than(0.5),
        field.less_than(0.5),
        field.matches(r"^urg"),
        when.errored(),
    ]


@settings(max_examples=300, deadline=None)
@given(payload=JSON | st.dictionaries(FIELDS, JSON, max_size=4), name=FIELDS)
def test_non_strict_predicates_answer_a_bool_for_any_payload(payload: Any, name: str) -> None:
    env = Envelope(payload)
    for predicate in verbs(name):
        assert predicate(env) in (True, False), predicate


class Triage(BaseModel):
    summary: str
    severity: Literal["urgent", "normal", "spam"] | None = None


class ReplyModel:
    def __init__(self, reply: str) -> None:
        self.reply = reply

    async def complete_json(self, messages: list[dict[str, str]], *, schema: dict[str, Any]) -> str:
        return self.reply


SHAPES = {
    ("classify", "urgent", "archive"),
    ("classify", "normal", "archive"),
    ("classify", "spam", "archive"),
    ("classify", "urgent", "normal", "spam", "archive"),  # severity None: linear
}

REPLIES = st.one_of(
    st.text(max_size=30),
    JSON.map(json.dumps),
    st.fixed_dictionaries(
        {
            "summary": st.text(max_size=10) | st.integers(),
            "severity": st.sampled_from(["urgent", "normal", "spam", "URGENT", "archive", "", None]),
        },
        optional={"extra": JSON},
    ).map(json.dumps),
)


@settings(max_examples=300, deadline=None)
@given(reply=REPLIES)
def test_an_llm_routed_plan_never_raises_on_any_reply(reply: str) -> None:
    plan = Plan(
        Step(ReplyModel(reply), name="classify", output=Triage, routes_by="severity", after_branches="archive"),
        Step(lambda t: "paged", name="urgent"),
        Step(lambda t: "queued", name="normal"),
        Step(lambda t: "closed", name="spam"),
        Step(lambda outcome: outcome, name="archive"),
    )
    result = plan.run("ticket")
    if result.ok:
        assert result.path in SHAPES
    else:
        assert result.path == ("classify",)
        assert result.stop_reason == "step_error:ValidationError"
