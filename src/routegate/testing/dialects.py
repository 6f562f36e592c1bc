"""How real OpenAI-compatible servers answer a request for an output format they lack, for
:class:`~routegate.testing.ScriptedOpenAIServer`'s ``lacks=`` option.

Each entry is the status and message the server sends (as the servers' own code and documentation give them):

========== ============= ======================================================================================
server     lacks         answer
========== ============= ======================================================================================
openai     json_schema   400 ``Invalid parameter: 'response_format' of type 'json_schema' is not supported with
                         this model.`` (models before structured outputs)
openai     tools         400 ``tools is not supported in this model.``
vllm       tools         400 ``"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be
                         set`` (no tool parser; vLLM before 0.8.3 refused ``tool_choice="required"`` likewise)
vllm       json_schema   400 ``The provided JSON schema contains features not supported by xgrammar.``
llamacpp   tools         500 ``tools param requires --jinja flag`` (llama-server started without ``--jinja``)
llamacpp   json_schema   500 ``response_format type must be one of "text" or "json_object", but got:
                         json_schema`` (builds before JSON schema support)
ollama     tools         400 ``registry.ollama.ai/library/<model>:latest does not support tools``
ollama     json_schema   ignored: the server answers as if no format had been asked (before Ollama 0.5)
========== ============= ======================================================================================

vLLM writes its errors as a top-level object (``{"object": "error", "message": ..., "code": 400}``), the others
under ``"error"``; the ``openai`` SDK reads both.
"""

from __future__ import annotations

import json
from typing import Final, Literal

from routegate.testing.steps import ErrorReply, RawReply

Dialect = Literal["openai", "vllm", "llamacpp", "ollama"]
LackedMode = Literal["tools", "json_schema"]

_MESSAGES: Final[dict[tuple[str, str], tuple[int, str] | None]] = {
    ("openai", "json_schema"): (
        400,
        "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
    ),
    ("openai", "tools"): (400, "tools is not supported in this model."),
    ("vllm", "tools"): (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
    ("vllm", "json_schema"): (400, "The provided JSON schema contains features not supported by xgrammar."),
    ("llamacpp", "tools"): (500, "tools param requires --jinja flag"),
    ("llamacpp", "json_schema"): (
        500,
        'response_format type must be one of "text" or "json_object", but got: json_schema',
    ),
    ("ollama", "tools"): (400, "registry.ollama.ai/library/{model}:latest does not support tools"),
    ("ollama", "json_schema"): None,
}


def refusal(dialect: Dialect, mode: LackedMode, model: str) -> ErrorReply | RawReply | None:
    """``dialect``'s answer to a request for ``mode`` it lacks, or ``None`` when it ignores the format."""
    entry = _MESSAGES[(dialect, mode)]
    if entry is None:
        return None
    status, message = entry
    message = message.format(model=model)
    if dialect == "vllm":
        body = {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": status}
        return RawReply(json.dumps(body).encode("utf-8"), status=status)
    kind = "server_error" if status >= 500 else "invalid_request_error"
    # a 500 is retried by the openai SDK as a real llama.cpp's is; retry-after-ms only keeps the test's wait short
    return ErrorReply(status, message=message, type=kind)
