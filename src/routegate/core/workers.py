"""Workers: the execution layer. Each declares a name, a description and a pydantic argument schema.

Declare one with the :func:`worker` decorator (the schema is derived from the signature unless given) or by
building :class:`Worker` directly. Sync and async callables are both accepted. A sync worker runs on a worker
thread by default, so that a run's deadline can cut it off; ``inline=True`` runs it on the event loop instead
(for pure, fast code: cheaper, but the deadline is then only checked after it returns).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar, overload

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model
from pydantic_core import PydanticKnownError

from routegate.core.context import RunContext, context_parameter
from routegate.core.flow_rules import FlowRules
from routegate.core.provenance import From
from routegate.errors import ConfigurationError

FnT = TypeVar("FnT", bound=Callable[..., Any])


def collapse_whitespace(value: object) -> object:
    """Trim and collapse runs of whitespace in a string (other values pass through)."""
    if isinstance(value, str):
        return " ".join(value.split())
    return value


def _non_blank_text(value: object) -> object:
    """:func:`collapse_whitespace`, and the refusal of what collapses to nothing, in one call.

    It is the validation ``collapse_whitespace`` then ``min_length=1`` made, with the same error (``too_short``,
    the same message and context): ``min_length`` placed after a Python validator runs as a second Python
    validator (a partial), so one call does both. Bytes go on to the ``str`` schema unchanged, as before; only
    empty ones decode to an empty string."""
    if isinstance(value, str):
        text = " ".join(value.split())
        if text:
            return text
    elif not (isinstance(value, bytes | bytearray) and not value):
        return value
    raise PydanticKnownError("too_short", {"field_type": "Value", "min_length": 1, "actual_length": 0})


NormalizedText = Annotated[str, BeforeValidator(_non_blank_text), Field(json_schema_extra={"minLength": 1})]
"""A required, non-blank string whose whitespace is trimmed and collapsed (the specialists' ``ticket``)."""


class WorkerArgs(BaseModel):
    """Base for worker argument schemas: unknown keys are refused, strings are kept strict."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class TicketArgs(WorkerArgs):
    """The example specialists take one argument: the support ticket text."""

    ticket: NormalizedText


@dataclass(frozen=True, slots=True)
class _Signature:
    accepted: frozenset[str]
    required: frozenset[str]
    var_keyword: bool

    @classmethod
    def of(cls, fn: Callable[..., Any], context: str | None = None) -> _Signature:
        accepted: set[str] = set()
        required: set[str] = set()
        var_keyword = False
        for param in inspect.signature(fn).parameters.values():
            if param.name == context:
                continue  # the run context is passed by the runtime, never by a route
            if param.kind is param.VAR_KEYWORD:
                var_keyword = True
            elif param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
                accepted.add(param.name)
                if param.default is param.empty:
                    required.add(param.name)
        return cls(frozenset(accepted), frozenset(required), var_keyword)

    def mismatch(self, args: Mapping[str, Any]) -> str | None:
        """Why ``fn(**args)`` would not bind, or ``None`` if it binds."""
        keys = args.keys()
        # the arguments that bind, checked without building a set: only a refusal pays for the differences
        if self.required <= keys and (self.var_keyword or keys <= self.accepted):
            return None
        missing = self.required - keys
        if missing:
            return f"missing argument(s) {sorted(missing)}"
        if not self.var_keyword:
            unexpected = keys - self.accepted
            if unexpected:
                return f"unexpected argument(s) {sorted(unexpected)}"
        return None


def _schema_from_signature(name: str, fn: Callable[..., Any], context: str | None) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    hints = inspect.get_annotations(fn, eval_str=True)
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name == context:
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigurationError(f"worker {name!r}: positional-only parameter {param.name!r} cannot be routed")
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    model_name = "".join(part.title() for part in name.split("_")) + "Args"
    return create_model(model_name, __base__=WorkerArgs, **fields)


@dataclass(frozen=True, slots=True)
class Worker:
    """A named executor with a declared argument schema.

    A parameter annotated :class:`~routegate.core.RunContext` receives the run's context; it is not part of the
    argument schema, so no route can set it.

    Flow rules (where each argument may come from, :mod:`routegate.core.provenance`) are read from the schema's
    ``Annotated[..., From(...)]`` metadata, then ``flows`` (argument name → :class:`~routegate.core.From`);
    ``flow_rules`` is ``None`` when there are none.
    """

    name: str
    fn: Callable[..., Any]
    description: str = ""
    args_model: type[BaseModel] | None = None
    inline: bool = False
    flows: Mapping[str, From] | None = field(default=None, compare=False)
    is_async: bool = field(init=False)
    flow_rules: FlowRules | None = field(init=False, repr=False, compare=False)
    context_param: str | None = field(init=False, repr=False)
    _signature: _Signature = field(init=False, repr=False)
    _awaited: bool = field(init=False, repr=False, compare=False)  # invoke always returns an awaitable

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or self.name != self.name.strip():
            raise ConfigurationError(f"worker name must be a non-blank string without outer spaces: {self.name!r}")
        if not callable(self.fn):
            raise ConfigurationError(f"worker {self.name!r}: fn must be callable, got {type(self.fn).__name__}")
        context = context_parameter(self.fn)
        object.__setattr__(self, "context_param", context)
        model = self.args_model or _schema_from_signature(self.name, self.fn, context)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigurationError(f"worker {self.name!r}: args_model must be a pydantic model class")
        object.__setattr__(self, "args_model", model)
        signature = _Signature.of(self.fn, context)
        object.__setattr__(self, "_signature", signature)
        rules = FlowRules.of(self.name, model, self.flows, open_args=signature.var_keyword)
        object.__setattr__(self, "flow_rules", rules)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))
        object.__setattr__(self, "_awaited", self.is_async or not self.inline)
        if not self.description:
            doc = inspect.getdoc(self.fn) or ""
            object.__setattr__(self, "description", doc.split("\n\n")[0].replace("\n", " "))

    @property
    def schema(self) -> type[BaseModel]:
        assert self.args_model is not None  # set in __post_init__
        return self.args_model

    def args_mismatch(self, args: Mapping[str, Any]) -> str | None:
        """Why these arguments do not fit the callable's signature (``route_bad_args``), else ``None``."""
        return self._signature.mismatch(args)

    def invoke(self, args: Mapping[str, Any], ctx: RunContext[Any] | None = None) -> Awaitable[Any] | Any:
        """Call the worker; returns an awaitable for async and threaded workers, the value for inline ones.

        ``ctx`` goes to the worker's :class:`~routegate.core.RunContext` parameter, if it declares one.
        """
        if self.context_param is not None:
            args = {**args, self.context_param: ctx}
        if self.is_async or self.inline:
            return self.fn(**args)
        return asyncio.to_thread(self.fn, **args)  # in a copy of the caller's context: its span stays the parent


@overload
def worker(fn: FnT, /) -> Worker: ...


@overload
def worker(
    *,
    name: str | None = None,
    description: str = "",
    args: type[BaseModel] | None = None,
    inline: bool = False,
    flows: Mapping[str, From] | None = None,
) -> Callable[[Callable[..., Any]], Worker]: ...


def worker(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str = "",
    args: type[BaseModel] | None = None,
    inline: bool = False,
    flows: Mapping[str, From] | None = None,
) -> Worker | Callable[[Callable[..., Any]], Worker]:
    """Declare a worker: ``@worker`` or ``@worker(name=..., description=..., args=Model, inline=True,
    flows={"recipient": From("user")})``."""

    def build(target: Callable[..., Any]) -> Worker:
        return Worker(
            name=name or target.__name__,
            fn=target,
            description=description,
            args_model=args,
            inline=inline,
            flows=flows,
        )

    if fn is not None:
        return build(fn)
    return build
