"""The one check on text that enters over HTTP: no NUL character, no lone surrogate.

PostgreSQL's ``text`` cannot hold NUL, and a lone surrogate (``"\\ud800"`` in JSON) cannot be encoded as UTF-8,
so either would fail deep in the desk or the driver. :func:`check_text` refuses both at the edge, and every way
text enters uses it:

* request bodies: models derive from :class:`CheckedBody`, whose ``before`` validator walks the whole raw body
  (declared fields, OpenAI content parts, ignored extra fields, keys) before any field is validated;
* path and header parameters: the :data:`Text` type.

The failure is a pydantic error of type ``invalid_text`` whose message names the place
(``messages.0.content: contains a NUL character at position 3; ...``); the app turns it into the same 422 body on
every endpoint (``_errors.describe_validation_errors``).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, model_validator
from pydantic_core import PydanticCustomError

from routegate.core import messages

INVALID_TEXT = "invalid_text"
_MAX_DEPTH = 64


def text_problem(value: str) -> str | None:
    """What is wrong with ``value`` (``None`` when it can be stored and echoed as it is): the one message rule's
    character check (:func:`routegate.core.messages.text_problem`), here for every text field, not only messages."""
    found = messages.text_problem(value)
    return None if found is None else found[1]


def check_text(value: str, where: str) -> str:
    """``value`` unchanged, or a pydantic ``invalid_text`` error that names ``where``."""
    problem = text_problem(value)
    if problem is not None:
        raise PydanticCustomError(INVALID_TEXT, "{where}: {problem}", {"where": where, "problem": problem})
    return value


def check_tree(value: Any, where: str = "body", depth: int = 0) -> None:
    """:func:`check_text` on every string (keys included) of a decoded JSON value."""
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, dict):
        if depth > _MAX_DEPTH:  # json.loads would have refused deeper input long before; bound the walk anyway
            return
        for key, item in value.items():
            name = str(key) if where == "body" else f"{where}.{key}"
            if isinstance(key, str):  # the key itself is not echoed: it is what holds the bad character
                check_text(key, f"a key of {where}")
            check_tree(item, name, depth + 1)
    elif isinstance(value, list):
        if depth > _MAX_DEPTH:
            return
        for i, item in enumerate(value):
            check_tree(item, str(i) if where == "body" else f"{where}.{i}", depth + 1)


def _param(value: object) -> object:
    if isinstance(value, str):
        check_text(value, "")  # the error's location names the parameter
    return value


Text = Annotated[str, BeforeValidator(_param)]
"""A ``str`` path/header parameter refused with ``invalid_text`` when it holds NUL or a lone surrogate."""


class CheckedBody(BaseModel):
    """Base of every request body: the whole raw body passes :func:`check_tree` before field validation."""

    @model_validator(mode="before")
    @classmethod
    def _check_text(cls, data: Any) -> Any:
        check_tree(data)
        return data
