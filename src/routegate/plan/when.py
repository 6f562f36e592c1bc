"""``when`` — declarative routing predicates for ``Step(routes={...})``.

Every verb returns a :class:`Predicate`: a lazy callable ``(Envelope) -> bool`` that the plan calls after the
step ran. Nothing is evaluated when the plan is built::

    when.field("items").empty()              # None or a zero-length container
    when.field("severity").equals("urgent")
    when.field("items", strict=True).empty() # a missing field raises instead of reading as None
    when.payload(lambda p: p.score < 0.5)    # escape hatch over the payload
    when.envelope(lambda env: ...)           # escape hatch over the whole envelope
    when.errored()                           # the step failed

Field access works on pydantic models, dataclasses, plain objects and mappings (keys, never mapping methods).
Field and payload predicates are ``False`` on an errored envelope: route failures with ``when.errored()``.
Non-strict field predicates never raise on odd values (model output is untrusted): a missing field reads as
None and a value that does not compare is not greater or less than anything.
Predicates combine with ``&``, ``|`` and ``~``; each one has a readable ``repr`` that the trace uses as the
reason a route was taken. Misuse while building a predicate (a blank field name, a string given to ``in_()``, a
non-callable given to ``when.payload``, ``&`` or ``|``) raises :class:`~routegate.plan.PlanCompileError`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from routegate.plan.envelope import Envelope
from routegate.plan.errors import PlanCompileError

EnvelopePredicate = Callable[[Envelope], Any]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


_MISSING: Any = _Missing()
# payload types that have no fields: never read attributes off them (``"text".count`` is a method, not a field)
_NO_FIELDS: frozenset[type] = frozenset({type(None), str, bytes, bytearray, int, float, complex, bool, list, tuple})


def callable_name(fn: object) -> str:
    """A short readable name for a callable: ``needs_review``, ``<lambda>``, ``when.field('x').empty()``."""
    if isinstance(fn, Predicate):
        return fn.description
    name = getattr(fn, "__name__", None)
    if isinstance(name, str):
        return name
    return type(fn).__name__


class Predicate:
    """A routing predicate: call it with an :class:`Envelope`; ``repr`` says what it tests."""

    __slots__ = ("description", "fn")

    def __init__(self, fn: Callable[[Envelope], bool], description: str) -> None:
        self.fn = fn
        self.description = description

    def __call__(self, env: Envelope) -> bool:
        return self.fn(env)

    def __repr__(self) -> str:
        return self.description

    def __and__(self, other: EnvelopePredicate) -> Predicate:
        first, second = self.fn, _plain(other)
        return Predicate(lambda env: bool(first(env)) and bool(second(env)), f"({self} & {callable_name(other)})")

    def __or__(self, other: EnvelopePredicate) -> Predicate:
        first, second = self.fn, _plain(other)
        return Predicate(lambda env: bool(first(env)) or bool(second(env)), f"({self} | {callable_name(other)})")

    def __invert__(self) -> Predicate:
        inner = self.fn
        return Predicate(lambda env: not inner(env), f"~{self}")


def _plain(fn: EnvelopePredicate) -> Callable[[Envelope], Any]:
    if isinstance(fn, Predicate):
        return fn.fn
    if not callable(fn):
        raise PlanCompileError(
            f"can only combine a predicate with a callable (a when.* predicate or a function of the envelope), "
            f"got {type(fn).__name__}"
        )
    return fn


def read_field(payload: Any, name: str) -> Any:
    """``payload[name]`` for a mapping, ``payload.name`` for an object; ``_MISSING`` when absent."""
    if isinstance(payload, dict):
        return payload.get(name, _MISSING)
    if type(payload) in _NO_FIELDS:
        return _MISSING
    if isinstance(payload, Mapping):
        return payload.get(name, _MISSING)
    return getattr(payload, name, _MISSING)


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    try:
        return len(value) == 0
    except TypeError:  # numbers, booleans and other unsized values count as present
        return False


class FieldRef:
    """``when.field(name)``: pick a verb to turn it into a :class:`Predicate`."""

    __slots__ = ("name", "strict")

    def __init__(self, name: str, *, strict: bool = False) -> None:
        if not isinstance(name, str) or not name:
            raise PlanCompileError(f"when.field() takes a non-empty field name (a string), got {name!r}")
        self.name = name
        self.strict = strict

    def __repr__(self) -> str:
        return f"when.field({self.name!r}, strict=True)" if self.strict else f"when.field({self.name!r})"

    def _predicate(self, test: Callable[[Any], bool], verb: str) -> Predicate:
        name, strict = self.name, self.strict

        def predicate(env: Envelope) -> bool:
            if env.error is not None:
                return False
            payload = env.payload
            value = payload.get(name, _MISSING) if isinstance(payload, dict) else read_field(payload, name)
            if value is _MISSING:
                if strict:
                    raise AttributeError(
                        f"when.field({name!r}, strict=True): payload of type {type(payload).__name__} "
                        f"has no field {name!r}"
                    )
                value = None
            return test(value)

        return Predicate(predicate, f"{self!r}.{verb}")

    # -- emptiness ---------------------------------------------------------------------------------------------
    def empty(self) -> Predicate:
        """The field is None or a zero-length container (numbers and booleans are never empty)."""
        return self._predicate(_is_empty, "empty()")

    def not_empty(self) -> Predicate:
        return self._predicate(lambda value: not _is_empty(value), "not_empty()")

    # -- equality and identity ---------------------------------------------------------------------------------
    def equals(self, expected: Any) -> Predicate:
        return self._predicate(lambda value: bool(value == expected), f"equals({expected!r})")

    def not_equals(self, expected: Any) -> Predicate:
        return self._predicate(lambda value: bool(value != expected), f"not_equals({expected!r})")

    def is_(self, expected: Any) -> Predicate:
        """Identity: for ``True``, ``False`` and ``None`` (``equals(True)`` would also match ``1``)."""
        return self._predicate(lambda value: value is expected, f"is_({expected!r})")

    # -- membership --------------------------------------------------------------------------------------------
    def in_(self, values: Iterable[Any]) -> Predicate:
        haystack = _haystack(values)
        return self._predicate(lambda value: _contains(haystack, value), f"in_({_show(values)})")

    def not_in_(self, values: Iterable[Any]) -> Predicate:
        haystack = _haystack(values)
        return self._predicate(lambda value: not _contains(haystack, value), f"not_in_({_show(values)})")

    # -- comparison --------------------------------------------------------------------------------------------
    def greater_than(self, threshold: Any) -> Predicate:
        """``value > threshold``; None, or a value that does not compare (``"high" > 0.5``), is False — unless
        ``strict=True``, where a value that does not compare raises."""
        return self._predicate(_compared(operator.gt, threshold, self.strict), f"greater_than({threshold!r})")

    def less_than(self, threshold: Any) -> Predicate:
        """``value < threshold``, with the same rules as :meth:`greater_than`."""
        return self._predicate(_compared(operator.lt, threshold, self.strict), f"less_than({threshold!r})")

    # -- text --------------------------------------------------------------------------------------------------
    def matches(self, pattern: str) -> Predicate:
        """``re.search(pattern, value)``; a value that is not a string never matches."""
        compiled = re.compile(pattern)
        return self._predicate(
            lambda value: isinstance(value, str) and compiled.search(value) is not None, f"matches({pattern!r})"
        )


def _compared(compare: Callable[[Any, Any], Any], threshold: Any, strict: bool) -> Callable[[Any], bool]:
    """The test of :meth:`FieldRef.greater_than` / :meth:`FieldRef.less_than`: ``compare(value, threshold)``; None is
    False, and so is a value that does not compare unless ``strict``, where its ``TypeError`` propagates."""

    def test(value: Any) -> bool:
        try:
            return value is not None and bool(compare(value, threshold))
        except TypeError:
            if strict:
                raise
            return False

    return test


def _haystack(values: Iterable[Any]) -> frozenset[Any] | tuple[Any, ...]:
    if isinstance(values, str | bytes):
        raise PlanCompileError("in_()/not_in_() take a collection of values, not a string (wrap it: {'value'})")
    try:
        items = tuple(values)
    except TypeError:
        raise PlanCompileError(
            f"in_()/not_in_() take a collection of values, got {type(values).__name__} (wrap it: {{value}})"
        ) from None
    try:
        return frozenset(items)
    except TypeError:  # unhashable members: linear scan
        return items


def _contains(haystack: frozenset[Any] | tuple[Any, ...], value: Any) -> bool:
    try:
        return value in haystack
    except TypeError:  # an unhashable value is not in a set of hashables
        return False


def _show(values: Iterable[Any]) -> str:
    if isinstance(values, set | frozenset):
        return "{" + ", ".join(sorted(repr(v) for v in values)) + "}"
    return repr(values)


class When:
    """The entry point of the predicate DSL; use the module-level :data:`when` instance."""

    __slots__ = ()

    @staticmethod
    def field(name: str, *, strict: bool = False) -> FieldRef:
        """Inspect ``payload.<name>`` (or ``payload[name]``). ``strict=True``: a missing field raises."""
        return FieldRef(name, strict=strict)

    @staticmethod
    def payload(test: Callable[[Any], Any]) -> Predicate:
        """Escape hatch: ``test(payload)``, for checks over several fields. False on an errored envelope."""
        if not callable(test):
            raise PlanCompileError(
                f"when.payload() takes a callable of the payload (e.g. lambda p: p.score < 0.5), "
                f"got {type(test).__name__}"
            )

        def predicate(env: Envelope) -> bool:
            return env.error is None and bool(test(env.payload))

        return Predicate(predicate, f"when.payload({callable_name(test)})")

    @staticmethod
    def envelope(test: Callable[[Envelope], Any]) -> Predicate:
        """Escape hatch: ``test(envelope)`` — sees the error and metadata too."""
        if not callable(test):
            raise PlanCompileError(
                f"when.envelope() takes a callable of the envelope (e.g. lambda env: env.ok), got {type(test).__name__}"
            )
        return Predicate(lambda env: bool(test(env)), f"when.envelope({callable_name(test)})")

    @staticmethod
    def errored() -> Predicate:
        """True iff the step failed (its envelope carries an error)."""
        return Predicate(_errored, "when.errored()")


def _errored(env: Envelope) -> bool:
    return env.error is not None


when = When()
