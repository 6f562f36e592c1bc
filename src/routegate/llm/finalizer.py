"""The LLM finalizer: the routing agent's final-synthesis step, evidence taken only from the run's history.

With ``extra`` (a pydantic model) it also asks the model for structured data beside the answer, in the strongest
output format the endpoint takes (``mode``, as for the LLM router: a ``final_answer`` tool call, one strict JSON
schema, or a JSON object): ``{"answer": "...", "extra": {...}}``. The data is validated against ``extra`` and
returned as the :class:`~routegate.core.FinalAnswer`'s ``extra`` (it lands on the result's ``extra``); data that does
not fit stops the run with ``llm_error:bad_output``, an empty answer with ``llm_empty`` as always.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from routegate.core.protocols import FinalAnswer, FinalizeRequest
from routegate.errors import ConfigurationError
from routegate.llm.errors import LLMEmptyError, LLMOutputError
from routegate.llm.fallback import Format, Mode, ModeLadder, NoToolCall
from routegate.llm.prompts import FINAL_SYSTEM_PROMPT
from routegate.llm.protocol import ChatMessage, ChatModel
from routegate.llm.strict import strict_schema, without_strict_nulls
from routegate.llm.structured import SchemaFormat, ToolsFormat, ToolSpec

FINAL_TOOL: Final = "final_answer"
_SHAPES: Final[dict[Format, str]] = {
    "json": 'Answer with one JSON object only: {"answer": "<the final answer>", "extra": {...}}, where extra fits '
    "this JSON schema:\n",
    "json_schema": "Answer with the JSON object the response schema describes: answer is the final answer, extra "
    "the data it asks for.",
    "tools": f"Call the {FINAL_TOOL} tool: answer is the final answer, extra the data it asks for.",
}


def final_payload(request: FinalizeRequest) -> dict[str, Any]:
    """What the model is shown: the goal, the route that completed and the history (routes + observations)."""
    return {
        "goal": request.goal,
        "selected_route": request.selected_route,
        "history": [entry.to_dict() for entry in request.history],
    }


def final_messages(request: FinalizeRequest, *, system_prompt: str = FINAL_SYSTEM_PROMPT) -> list[ChatMessage]:
    return [
        {"role": "system", "content": system_prompt},
        {"role": "user", "content": json.dumps(final_payload(request), ensure_ascii=True)},
    ]


def _answer_schema(extra: type[BaseModel]) -> dict[str, Any]:
    """``{"answer": string, "extra": <extra's schema>}`` with the extra's definitions at the root."""
    schema = extra.model_json_schema(ref_template="#/$defs/{model}")
    defs = schema.pop("$defs", None)
    root: dict[str, Any] = {
        "type": "object",
        "properties": {"answer": {"type": "string"}, "extra": schema},
        "required": ["answer", "extra"],
        "additionalProperties": False,
    }
    if defs:
        root["$defs"] = defs
    return root


class LLMFinalizer:
    """Composes the final answer with a chat model; calls no worker.

    An empty (or blank) answer is not masked with fallback text: it stops the run with ``llm_empty``.
    Endpoint failures stop it with the model's own stop reasons (``llm_timeout``, ``llm_error:*``). ``extra`` and
    ``mode``: structured data beside the answer (module documentation).
    """

    def __init__(
        self,
        chat_model: ChatModel,
        *,
        system_prompt: str = FINAL_SYSTEM_PROMPT,
        extra: type[BaseModel] | None = None,
        mode: Mode = "json",
    ) -> None:
        if extra is not None and not (isinstance(extra, type) and issubclass(extra, BaseModel)):
            raise ConfigurationError(f"LLMFinalizer.extra must be a pydantic model class, got {extra!r}")
        if extra is None and mode != "json":
            raise ConfigurationError(f"LLMFinalizer(mode={mode!r}) applies to the extra data's schema: give extra=")
        self.chat_model = chat_model
        self.system_prompt = system_prompt
        self.extra = extra
        self._ladder = ModeLadder(mode, chat_model, owner="LLMFinalizer")
        self._schema = _answer_schema(extra) if extra is not None else None

    async def astream(self, request: FinalizeRequest) -> AsyncIterator[str]:
        """The final answer as it is generated (for streaming servers); leading blank deltas are dropped and an
        answer that stays blank ends with :class:`~routegate.llm.errors.LLMEmptyError` after the stream."""
        started = False
        async for delta in self.chat_model.stream(final_messages(request, system_prompt=self.system_prompt)):
            if not started:
                delta = delta.lstrip()
                started = bool(delta)
            if delta:
                yield delta
        if not started:
            raise LLMEmptyError(f"the model streamed an empty final answer for route {request.selected_route!r}")

    async def finalize(self, request: FinalizeRequest) -> str | FinalAnswer:
        if self.extra is not None:
            return await self._finalize_with_extra(request, self.extra)
        text = await self.chat_model.complete(final_messages(request, system_prompt=self.system_prompt))
        return self._checked(text, request)

    def _checked(self, text: str, request: FinalizeRequest) -> str:
        answer = text.strip()
        if not answer:
            raise LLMEmptyError(
                f"the model returned an empty final answer ({len(text)} characters, all blank) "
                f"for route {request.selected_route!r}"
            )
        return answer

    async def _finalize_with_extra(self, request: FinalizeRequest, extra: type[BaseModel]) -> FinalAnswer:
        value, _notes = await self._ladder.first(lambda fmt: self._ask(fmt, request))
        answer, data = value.get("answer"), value.get("extra")
        if not isinstance(answer, str):
            raise LLMOutputError(f"the model's final answer is {type(answer).__name__}, not text")
        text = self._checked(answer, request)
        try:
            fitted = extra.model_validate(data)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first.get("loc", ())) or "extra"
            raise LLMOutputError(
                f"the model's extra data does not fit {extra.__name__}: {where}: {first['msg']}"
            ) from exc
        return FinalAnswer(text, fitted.model_dump(mode="json"))

    def _messages(self, request: FinalizeRequest, fmt: Format) -> list[ChatMessage]:
        shape = _SHAPES[fmt]
        if fmt == "json":
            shape += json.dumps(self._schema_of_extra(), ensure_ascii=True)
        return final_messages(request, system_prompt=f"{self.system_prompt}\n{shape}")

    def _schema_of_extra(self) -> Mapping[str, Any]:
        assert self._schema is not None
        return {
            **self._schema["properties"]["extra"],
            **({"$defs": self._schema["$defs"]} if "$defs" in self._schema else {}),
        }

    async def _ask(self, fmt: Format, request: FinalizeRequest) -> dict[str, Any]:
        schema = self._schema
        assert schema is not None  # only with extra
        messages = self._messages(request, fmt)
        if fmt == "json":
            text = await self.chat_model.complete(messages, json_mode=True)
        elif fmt == "json_schema":
            strict = strict_schema(schema)  # StrictSchemaError: the ladder passes over json_schema
            reply = await self._ladder.model().respond(messages, output=SchemaFormat(FINAL_TOOL, strict))
            text = reply.text
        else:
            tools = ToolsFormat((ToolSpec(FINAL_TOOL, "The final answer and its data", schema),))
            reply = await self._ladder.model().respond(messages, output=tools)
            calls = [call for call in reply.tool_calls if call.name == FINAL_TOOL]
            if not calls:
                raise NoToolCall(f"the model answered without calling {FINAL_TOOL} ({len(reply.text)} characters)")
            text = calls[0].arguments
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise LLMOutputError(
                f"the model's final answer is not the JSON object asked for ({len(text)} characters)"
            ) from exc
        if not isinstance(value, dict):
            raise LLMOutputError(f"the model's final answer is JSON {type(value).__name__}, not an object")
        return without_strict_nulls(value, schema) if fmt == "json_schema" else value
