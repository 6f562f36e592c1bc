"""The technique router's classifier: pattern matching on an agent's output, no model calls, linear time.

Recognised forms (the full table is in ``docs/technique.md``):

* **A2A request** — a fenced block tagged ``a2a`` / ``a2a_request`` / ``a2a-request``, or an
  ``<a2a_request>…</a2a_request>`` tag block, holding a JSON object (or a list of them) with a target agent and a
  task; or a whole output that is only such a JSON object with a ``target_agent`` key.
* **Tool call** — a fenced block tagged ``tool_call`` / ``tool-call`` / ``tool_calls`` / ``mcp``, or a
  ``<tool_call>…</tool_call>`` tag block (Hermes / Qwen style), holding JSON in one of the common shapes
  (``{"name", "arguments"}``, OpenAI ``{"type": "function", "function": {...}}``, ``{"tool_calls": [...]}``,
  ``{"server", "method", "arguments"}``); or a whole output that is only such JSON — bare, after ``[TOOL_CALLS]``
  (Mistral) or ``<|python_tag|>`` (Llama), or as the one ``json`` fence of the output.
* **Code block** — a closed fenced block whose language tag is an executable language (an allowlist).
* **Prose** — everything else, including inline code, untagged or data fences (``json``, ``yaml``, ``diff``...),
  unterminated fences, malformed JSON and fences inside block quotes. When in doubt, prose.
* **Bounds** — an output with more than 256 blocks worth keeping, or more fence and tag lines than 256 plus one
  per 16 characters (8,192 at most), is prose (``problems`` says which): no answer has that many, and the
  bounds cap the work per output.

Priority: A2A > tool call > code block > prose. Tag blocks and fences inside another fence are content.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from routegate.technique import _shapes
from routegate.technique._scan import MAX_PROBLEMS, LineCounter, Scan, scan
from routegate.technique.types import A2ARoutingRequest, ClassifiedOutput, CodeBlock, OutputKind, ToolCallRequest

EXECUTABLE_LANGUAGES: Mapping[str, str] = MappingProxyType(
    {
        "python": "python",
        "py": "python",
        "python3": "python",
        "py3": "python",
        "bash": "bash",
        "sh": "bash",
        "shell": "bash",
        "zsh": "zsh",
        "javascript": "javascript",
        "js": "javascript",
        "node": "javascript",
        "nodejs": "javascript",
        "typescript": "typescript",
        "ts": "typescript",
        "ruby": "ruby",
        "rb": "ruby",
        "perl": "perl",
        "php": "php",
        "r": "r",
        "lua": "lua",
        "julia": "julia",
        "powershell": "powershell",
        "pwsh": "powershell",
        "ps1": "powershell",
    }
)
"""Fence tags taken as executable code, mapped to the canonical language name used in ``code:<language>``."""

TOOL_CALL_TAGS = frozenset({"tool_call", "tool-call", "tool_calls", "mcp"})
A2A_TAGS = frozenset({"a2a", "a2a_request", "a2a-request"})
_WHOLE_OUTPUT_PREFIXES = ("[TOOL_CALLS]", "<|python_tag|>")


class TechniqueRouter:
    """Classifies agent output and extracts what to route: code blocks, tool calls, A2A requests.

    ``languages`` replaces the executable-language table (fence tag → canonical name). The router holds no
    state between calls; one instance can be shared.
    """

    __slots__ = ("_labels", "_languages")

    def __init__(self, *, languages: Mapping[str, str] | None = None) -> None:
        table = EXECUTABLE_LANGUAGES if languages is None else languages
        self._languages = MappingProxyType({tag.lower(): name for tag, name in table.items()})
        self._labels = frozenset(self._languages) | TOOL_CALL_TAGS | A2A_TAGS | {"json"}

    @property
    def languages(self) -> Mapping[str, str]:
        return self._languages

    def classify(self, output: str) -> ClassifiedOutput:
        """Classify agent output for routing. Never raises; anything unrecognised is prose."""
        value: object = output  # callers outside the type checker may pass anything
        if not isinstance(value, str):
            return ClassifiedOutput(OutputKind.PROSE, "", problems=(f"output is {type(value).__name__}, not text",))
        # fast path: text with no fence or tag marker has no blocks (a substring test runs at memory speed)
        if "```" in output or "~~~" in output or "<tool_call>" in output or "<a2a_request>" in output:
            found = scan(output, self._labels)
        else:
            found = Scan()
        if found.overflow:  # a bound on the work per output was reached (MAX_BLOCKS, marker_line_limit)
            return ClassifiedOutput(OutputKind.PROSE, output, problems=(found.overflow,))
        code: list[CodeBlock] = []
        calls: list[ToolCallRequest] = []
        requests: list[A2ARoutingRequest] = []
        where: LineCounter | None = None  # line numbers, counted only once a problem needs one
        for block in found.blocks:
            try:
                if block.label in A2A_TAGS:
                    requests.extend(_shapes.a2a_requests_from(_shapes.loads(block.body)))
                elif block.label in TOOL_CALL_TAGS:
                    calls.extend(_shapes.tool_calls_from(_shapes.loads(block.body)))
                elif block.kind == "fence" and block.label in self._languages:
                    if not block.body.strip():
                        raise _shapes.ShapeError("it is empty")
                    code.append(CodeBlock(self._languages[block.label], block.body))
            except _shapes.ShapeError as exc:
                if len(found.problems) < MAX_PROBLEMS:
                    where = where or LineCounter(output)
                    found.problem(f"{block.label} block at line {where.at(block.start)}: {exc}; not taken")
        if not (requests or calls or code):
            _whole_output(output, found, calls, requests)
        if requests:
            kind = OutputKind.A2A_REQUEST
        elif calls:
            kind = OutputKind.TOOL_CALL
        elif code:
            kind = OutputKind.CODE_BLOCK
        else:
            kind = OutputKind.PROSE
        return ClassifiedOutput(kind, output, tuple(code), tuple(calls), tuple(requests), tuple(found.problems))


def _whole_output(output: str, found: Scan, calls: list[ToolCallRequest], requests: list[A2ARoutingRequest]) -> None:
    """The whole output is one JSON call or request: bare, after a model's call marker, or as the one json fence.

    Bare JSON that is not a call is an ordinary JSON answer (prose, no problem noted); JSON after a call marker
    that does not parse or fit is noted in ``problems``.
    """
    stripped = output.strip()
    if not stripped:
        return
    marker = next((prefix for prefix in _WHOLE_OUTPUT_PREFIXES if stripped.startswith(prefix)), None)
    body: str | None = None
    if marker is not None:
        body = stripped[len(marker) :]
    elif stripped[0] in "{[":
        body = stripped
    elif found.fences == 1 and found.blocks and found.blocks[0].label == "json":
        only = found.blocks[0]
        if not output[: only.start].strip() and not output[only.end :].strip():
            body = only.body
    if body is None:
        return
    try:
        value = _shapes.loads(body)
        try:
            requests.extend(_shapes.a2a_requests_from(value, strict=True))
        except _shapes.ShapeError:
            calls.extend(_shapes.tool_calls_from(value))
    except _shapes.ShapeError as exc:
        if marker is not None:
            found.problem(f"{marker} output: {exc}; ignored")
