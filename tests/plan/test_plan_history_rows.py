"""History rows (``routegate.plan._deltas``): a run's checkpoints stored as changes come back exactly, and rows
edited by someone else — any JSON at all — are named as damaged, never raised on or rebuilt into a guess."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.plan._deltas import replay, stored_row

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


@st.composite
def attempts(draw: st.DrawFn) -> list[tuple[dict[str, Any], Any]]:
    """The checkpoints a writer appends: attempts of growing paths, each starting whole (``kept`` None)."""
    written: list[tuple[dict[str, Any], Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        envelopes: list[Any] = draw(st.lists(JSON, max_size=3))
        decisions: list[Any] = draw(st.lists(JSON, max_size=3))
        first = draw(JSON)
        kept = None
        for _ in range(draw(st.integers(1, 5))):
            envelopes = envelopes + draw(st.lists(JSON, max_size=2))
            decisions = decisions + draw(st.lists(JSON, max_size=2))
            doc: dict[str, Any] = {"input": first, "envelopes": envelopes, "decisions": decisions, "at": draw(JSON)}
            if draw(st.booleans()):
                doc["result"] = {
                    "envelopes": envelopes + draw(st.lists(JSON, max_size=2)),
                    "decisions": decisions + draw(st.lists(JSON, max_size=2)),
                    "payload": draw(JSON),
                }
            written.append((doc, kept))
            kept = (len(envelopes), len(decisions))
    return written


@settings(max_examples=150, deadline=None)
@given(attempts())
def test_checkpoints_stored_as_changes_come_back_exactly(written: list[tuple[dict[str, Any], Any]]) -> None:
    rows = [(seq, stored_row(doc, kept)) for seq, (doc, kept) in enumerate(written, 1)]
    back = [(seq, copy.deepcopy(doc)) for seq, doc in replay(rows)]  # each read as it comes: the lists grow on
    assert back == [(seq, doc) for seq, (doc, _) in enumerate(written, 1)]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(), st.dictionaries(st.sampled_from(["+", "envelopes", "decisions", "input", "result"]), JSON)
        ),
        max_size=6,
    )
)
def test_any_rows_are_rebuilt_or_named_never_raised_on(rows: list[dict[str, Any] | None]) -> None:
    for _, doc in replay(enumerate(rows, 1)):
        assert isinstance(doc, str | dict)
        if isinstance(doc, dict):
            assert isinstance(doc["envelopes"], list) and isinstance(doc["decisions"], list)


def _written_history() -> tuple[Any, list[tuple[int, str, str, float, str]]]:
    """A memory store holding a real run's history, and that run's rows as stored (JSON text)."""
    from routegate.plan import Plan, Step, Store, when

    store = Store()
    plan = Plan(
        Step(lambda n: n + 1, name="tick", routes={"tick": when.payload(lambda n: n < 3)}),
        Step(lambda n: {"done": n}, name="done"),
        store=store,
    )
    plan.run(0, checkpoint_key="k")
    backend = store.checkpoints
    return backend, list(backend._log["k"])  # type: ignore[attr-defined]  # the test edits the stored rows


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_history_with_any_field_of_any_row_edited_is_listed_never_raised_on(data: st.DataObject) -> None:
    import json

    from routegate.plan.history import read_history

    backend, rows = _written_history()
    at = data.draw(st.integers(0, len(rows) - 1))
    seq, status, reason, updated, text = rows[at]
    doc = json.loads(text)
    field = data.draw(st.sampled_from([*doc, "+", "parent", "result"]))
    doc[field] = data.draw(JSON)
    backend._log["k"][at] = (seq, status, reason, updated, json.dumps(doc))
    history = read_history(backend, "k")
    assert [c.at for c in history] == [r[0] for r in rows]
    for checkpoint in history:
        assert checkpoint.problem is not None or isinstance(checkpoint.route, str)


def test_a_decision_edited_into_an_empty_string_is_named_as_a_problem() -> None:
    """Hypothesis found it once: ``decisions: [""]`` (a decision without its route) once raised IndexError."""
    import json

    from routegate.plan.history import read_history

    backend, rows = _written_history()
    seq, status, reason, updated, text = rows[0]
    doc = json.loads(text)
    doc["decisions"] = [""]
    backend._log["k"][0] = (seq, status, reason, updated, json.dumps(doc))
    history = read_history(backend, "k")
    assert [c.at for c in history] == [r[0] for r in rows]
    first = next(iter(history))
    assert first.problem is not None and "IndexError" in first.problem
