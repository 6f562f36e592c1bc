"""Classifier behaviour beyond the corpus: priority, problems, configuration, properties and adversarial input."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.technique import OutputKind, TechniqueRouter
from routegate.technique.classify import EXECUTABLE_LANGUAGES
from routegate.technique.types import A2ARoutingRequest, CodeBlock, ToolCallRequest

ROUTER = TechniqueRouter()


def test_kind_values_are_the_seed_names() -> None:
    assert [kind.value for kind in OutputKind] == ["prose", "code_block", "tool_call", "a2a_request"]


def test_items_follow_the_winning_kind() -> None:
    text = (
        "```python\nprint(1)\n```\n"
        '<tool_call>{"name": "kb.search", "arguments": {"q": "x"}}</tool_call>\n'
        '```a2a\n{"target_agent": "legal", "task": "check"}\n```'
    )
    result = ROUTER.classify(text)
    assert result.kind is OutputKind.A2A_REQUEST
    assert result.items() == (A2ARoutingRequest("legal", "check"),)
    assert result.items(OutputKind.TOOL_CALL) == (ToolCallRequest("kb", "search", {"q": "x"}),)
    assert result.items(OutputKind.CODE_BLOCK) == (CodeBlock("python", "print(1)"),)
    assert result.items(OutputKind.PROSE) == ()
    assert not result.is_prose


def test_problems_explain_what_was_not_taken() -> None:
    text = (
        "```python\nprint(1)\n```\n"
        '<tool_call>\n{"name": "search", "arguments": }\n</tool_call>\n'
        "```bash\n\n```\n"
        "```python\nprint('cut"
    )
    result = ROUTER.classify(text)
    assert result.kind is OutputKind.CODE_BLOCK
    assert result.problems == (
        "fence (python) opened at line 10 is never closed; not extracted",
        "tool_call block at line 4: invalid JSON (Expecting value); not taken",
        "bash block at line 7: it is empty; not taken",
    )


def test_tool_call_marker_with_bad_json_is_a_problem_but_plain_json_is_not() -> None:
    assert ROUTER.classify("[TOOL_CALLS] [{oops}]").problems == (
        "[TOOL_CALLS] output: invalid JSON (Expecting property name enclosed in double quotes); ignored",
    )
    assert ROUTER.classify('{"answer": 42}').problems == ()


def test_problems_are_bounded() -> None:
    text = "".join(f'<tool_call>{{"bad": {i}}}</tool_call>\n' for i in range(100))
    result = ROUTER.classify(text)
    assert result.kind is OutputKind.PROSE
    assert len(result.problems) == 20


def test_too_many_calls_in_one_block_are_refused() -> None:
    calls = ", ".join('{"name": "a.b", "arguments": {}}' for _ in range(65))
    result = ROUTER.classify(f"```tool_calls\n[{calls}]\n```")
    assert result.kind is OutputKind.PROSE
    assert "over the limit of 64" in result.problems[0]


def test_non_text_input_is_prose() -> None:
    result = ROUTER.classify(b"```python\nprint(1)\n```")  # type: ignore[arg-type]  # misuse on purpose
    assert result.kind is OutputKind.PROSE
    assert result.problems == ("output is bytes, not text",)


def test_language_table_can_be_replaced() -> None:
    router = TechniqueRouter(languages={"Python": "python"})
    assert router.languages == {"python": "python"}
    assert router.classify("```bash\nls\n```").kind is OutputKind.PROSE
    assert router.classify("```python\nx = 1\n```").code_blocks == (CodeBlock("python", "x = 1"),)
    assert EXECUTABLE_LANGUAGES["py"] == "python"


def test_to_dict_is_json_ready() -> None:
    result = ROUTER.classify('{"name": "kb.search", "arguments": {"q": "x"}}')
    assert result.to_dict() == {
        "kind": "tool_call",
        "code_blocks": [],
        "tool_calls": [{"server": "kb", "method": "search", "arguments": {"q": "x"}}],
        "a2a_requests": [],
        "problems": [],
    }
    assert result.tool_calls[0].qualified_name == "kb/search"
    assert ToolCallRequest("", "search").qualified_name == "search"


# -- properties --------------------------------------------------------------------------------------------------

_TOKENS = st.sampled_from(
    [
        "```",
        "````",
        "~~~",
        "```python",
        "```py title=x",
        "```json",
        "```tool_call",
        "```a2a",
        "```mcp",
        "<tool_call>",
        "</tool_call>",
        "<a2a_request>",
        "</a2a_request>",
        "[TOOL_CALLS]",
        "<|python_tag|>",
        '{"name": "a.b", "arguments": {}}',
        '{"target_agent": "x", "task": "y"}',
        '{"server": "s", "method": "m"}',
        "{",
        "}",
        "[",
        "]",
        '"',
        "\n",
        "\r\n",
        "   ",
        "\t",
        "print(1)",
        "> ",
        "`",
    ]
)
_STRUCTURED = st.lists(st.one_of(_TOKENS, st.text(max_size=8)), max_size=40).map("".join)


def _check_invariants(text: str) -> None:
    result = ROUTER.classify(text)
    expected = (
        OutputKind.A2A_REQUEST
        if result.a2a_requests
        else OutputKind.TOOL_CALL
        if result.tool_calls
        else OutputKind.CODE_BLOCK
        if result.code_blocks
        else OutputKind.PROSE
    )
    assert result.kind is expected
    assert result.text is text
    assert len(result.problems) <= 20
    for block in result.code_blocks:
        assert block.language in set(EXECUTABLE_LANGUAGES.values())
        assert block.code.strip()
    for call in result.tool_calls:
        assert call.method
        assert isinstance(call.arguments, dict)
    for request in result.a2a_requests:
        assert request.target_agent
        assert request.task_description.strip()


@settings(max_examples=500, deadline=None)
@given(st.text())
def test_classify_never_raises_on_any_string(text: str) -> None:
    _check_invariants(text)


@settings(max_examples=1500, deadline=None)
@given(_STRUCTURED)
def test_classify_never_raises_on_fence_and_tag_soup(text: str) -> None:
    _check_invariants(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="`~<[{")))
def test_text_without_markers_is_prose(text: str) -> None:
    assert ROUTER.classify(text).kind is OutputKind.PROSE


# -- adversarial input: linear time ------------------------------------------------------------------------------

MB = 1_000_000


def _fill(unit: str, size: int = MB) -> str:
    return unit * (size // len(unit) + 1)


ADVERSARIAL = {
    "unterminated-openers": _fill("```python\n"),
    "open-close-pairs": _fill("```python\nx\n```\n"),
    "bare-fences": _fill("```\n"),
    "tool-openers": _fill("<tool_call>\n"),
    "tool-open-close": _fill('<tool_call>{"name": "a", "arguments": {}}</tool_call>\n'),
    "closers-then-openers": _fill("</tool_call>\n<tool_call>\n"),
    "deep-json-in-tag": "<tool_call>" + "[" * MB,
    "deep-json-bare": "[" * MB,
    "mistral-deep": "[TOOL_CALLS]" + "{" * MB,
    "giant-backtick-run": "`" * MB,
    "long-indent": " " * MB + "```python",
    "tildes-and-backticks": _fill("~~~\n```\n"),
    "newlines": "\n" * MB,
    "inline-fences": _fill("```a``` "),
    "huge-code-block": "```python\n" + _fill("x = 1\n") + "```\n",
    "a2a-openers": _fill("<a2a_request>\n"),
    "untagged-fences-with-content": _fill("```\nx\n```\n"),
    "data-fences": _fill("```yaml\nx\n```\n"),
    "bare-tilde-fences": _fill("~~~\n"),
    "inline-fences-one-per-line": _fill("```a```\n"),
    "short-closers-under-a-long-opener": "````python\n" + _fill("```\n"),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_one_megabyte_adversarial_input_is_fast(name: str) -> None:
    # The bound ("well under a second" for 1 MB); the best of three runs keeps a loaded machine's noise
    # out. Catastrophic backtracking would take minutes here, not seconds. Throughput lives in bench/technique.py.
    text = ADVERSARIAL[name]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        ROUTER.classify(text)
        best = min(best, time.perf_counter() - started)
    assert best < 1.0, f"{name}: {best:.3f}s for {len(text)} characters"


def test_hundreds_of_blocks_are_not_routed() -> None:
    text = "```python\nprint(1)\n```\n" * 257
    result = ROUTER.classify(text)
    assert result.kind is OutputKind.PROSE
    assert result.problems == ("more than 256 fenced or tag blocks; not routed",)
    assert ROUTER.classify("```python\nprint(1)\n```\n" * 256).kind is OutputKind.CODE_BLOCK


PROSE = "Then check the logs for the worker again. " * 4_000  # 168,000 characters: the 8,192-line cap applies


def test_thousands_of_fence_lines_are_not_routed() -> None:
    # the bound on marker lines examined: each empty fence is two, the code block two more
    code = "```python\nprint(1)\n```\n"
    text = "```\n```\n" * 4096 + code + PROSE
    result = ROUTER.classify(text)
    assert result.kind is OutputKind.PROSE
    assert result.code_blocks == ()
    assert result.problems == (f"more than 8192 fence or tag lines in {len(text)} characters; not routed",)
    assert ROUTER.classify("```\n```\n" * 4095 + code + PROSE).code_blocks == (CodeBlock("python", "print(1)"),)


def test_fence_lines_denser_than_one_per_16_characters_are_not_routed() -> None:
    # past the first 256 lines, one per 16 characters: 400 lines in 1,600 characters is over 256 + 100
    text = "```\n```\n" * 200
    assert ROUTER.classify(text).problems == ("more than 356 fence or tag lines in 1600 characters; not routed",)
    # a dense but real answer stays inside: a one-line block after every short sentence, up to MAX_BLOCKS
    answer = "Run this:\n```bash\nls -la\n```\n" * 256
    result = ROUTER.classify(answer)
    assert result.kind is OutputKind.CODE_BLOCK
    assert len(result.code_blocks) == 256
    assert result.problems == ()


def test_closing_fence_candidates_count_towards_the_bound() -> None:
    # a ```` fence is closed only by 4+ backticks; each shorter ``` line inside it is examined and counted
    def text(short: int) -> str:
        return "````python\nprint(1)\n" + "```\n" * short + "````\n" + PROSE

    assert ROUTER.classify(text(8190)).code_blocks == (CodeBlock("python", "print(1)\n" + "```\n" * 8189 + "```"),)
    result = ROUTER.classify(text(8191))
    assert result.kind is OutputKind.PROSE
    assert result.problems == (f"more than 8192 fence or tag lines in {len(text(8191))} characters; not routed",)


def test_tag_lines_count_towards_the_bound() -> None:
    call = '<tool_call>{"name": "kb.search", "arguments": {}}</tool_call>\n'
    assert ROUTER.classify("```\n```\n" * 4095 + call + PROSE).kind is OutputKind.TOOL_CALL
    text = "```\n```\n" * 4096 + call + PROSE
    result = ROUTER.classify(text)
    assert result.kind is OutputKind.PROSE
    assert result.problems == (f"more than 8192 fence or tag lines in {len(text)} characters; not routed",)
