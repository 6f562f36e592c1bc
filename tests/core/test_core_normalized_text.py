"""``NormalizedText`` (``TicketArgs.ticket``): it accepts, collapses and refuses exactly what the rule it replaced
did — a Python whitespace collapser followed by ``min_length=1`` — with the same error, and the policy turns those
errors into the same stop reasons and messages."""

from __future__ import annotations

import enum
import sys
from typing import Annotated, Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from routegate.core import RoutePolicy, TicketArgs
from routegate.core.policy import RouteRejection
from routegate.core.workers import collapse_whitespace


class _FormerTicketArgs(BaseModel):
    """The rule as it was written before: the collapser, then ``min_length`` as a validator of its own."""

    model_config = ConfigDict(extra="forbid", frozen=True, title="TicketArgs")

    ticket: Annotated[str, BeforeValidator(collapse_whitespace), Field(min_length=1)]


class _Tag(enum.StrEnum):
    SPACED = "  two \u3000 words "
    BLANK = " \t"
    PLAIN = "word"


class _Text(str):
    pass


WHITESPACE = "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())
# every character Python splits on, a few it does not (zero-width space, NUL, a control), and letters
ALPHABET = WHITESPACE + "ab\u00e9\u200b\x00\x07 "
texts = st.text(alphabet=ALPHABET, max_size=24) | st.text(max_size=24)
values = (
    texts
    | texts.map(_Text)
    | st.sampled_from(list(_Tag))
    | texts.map(lambda text: text.encode("utf-8"))
    | texts.map(lambda text: bytearray(text.encode("utf-8")))
    | st.binary(max_size=6)
    | st.none()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.lists(st.text(max_size=3), max_size=2)
)


def _outcome(model: type[BaseModel], value: object) -> tuple[str, Any, Any]:
    try:
        made = model.model_validate({"ticket": value})
    except ValidationError as exc:
        return ("refused", exc.errors(include_url=False), str(exc).splitlines()[1:])
    ticket = made.ticket  # type: ignore[attr-defined]
    return ("accepted", ticket, type(ticket))


FORMER = RoutePolicy({"billing"}, {"billing": _FormerTicketArgs})
NOW = RoutePolicy({"billing"}, {"billing": TicketArgs})


def _verdict(policy: RoutePolicy, value: object) -> object:
    verdict = policy.validate({"kind": "route", "target": "billing", "args": {"ticket": value}})
    if isinstance(verdict, RouteRejection):
        return (verdict.stop_reason, verdict.message)
    return verdict.to_dict()


@settings(max_examples=600, deadline=None)
@given(value=values)
def test_the_ticket_is_validated_as_before_for_any_value(value: object) -> None:
    assert _outcome(TicketArgs, value) == _outcome(_FormerTicketArgs, value)
    assert _verdict(NOW, value) == _verdict(FORMER, value)


def test_blank_and_non_text_tickets_keep_their_error_and_stop() -> None:
    for blank in ("", "  \n ", "\u3000\u2028", b""):
        assert _outcome(TicketArgs, blank)[1] == [
            {
                "type": "too_short",
                "loc": ("ticket",),
                "msg": "Value should have at least 1 item after validation, not 0",
                "input": blank,
                "ctx": {"field_type": "Value", "min_length": 1, "actual_length": 0},
            }
        ]
        assert _verdict(NOW, blank) == (
            (
                "invalid_route:missing_ticket",
                "route to 'billing': required argument 'ticket' is missing or blank",
            )
            if isinstance(blank, str)
            else (
                "invalid_route:bad_args",
                "route to 'billing': argument 'ticket' is invalid: "
                "Value should have at least 1 item after validation, not 0",
            )
        )
    assert _verdict(NOW, 12) == (
        "invalid_route:bad_args",
        "route to 'billing': argument 'ticket' is invalid: Input should be a valid string",
    )
    assert _outcome(TicketArgs, b"  ") == ("accepted", "  ", str)  # bytes are decoded, not collapsed, as before


def test_the_schema_routers_see_is_unchanged() -> None:
    assert TicketArgs.model_json_schema() == {
        **_FormerTicketArgs.model_json_schema(),
        "description": TicketArgs.__doc__,
    }
    assert TicketArgs.model_json_schema()["properties"]["ticket"] == {
        "minLength": 1,
        "title": "Ticket",
        "type": "string",
    }
