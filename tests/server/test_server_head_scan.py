"""The scan that bounds a request head while it arrives (:class:`routegate.server._limits.HeadScanner`), against
a model of the limits: the same verdict for any split of a head into reads, the refusal at the very byte that
crosses a limit, nothing looked at after the head. (The server's answers: ``test_server_head_limits.py``.)"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.server._limits import HeadLimits, HeadScanner

SMALL = HeadLimits(request_line=64, header_bytes=256, headers=8)


@st.composite
def heads(draw: st.DrawFn) -> tuple[bytes, int | None]:
    """A request head and what the limits make of it: ``None`` (accepted) or the refusal's status."""
    line = b"GET /" + b"a" * draw(st.integers(0, 90)) + b" HTTP/1.1\r\n"
    values = draw(st.lists(st.integers(0, 60), max_size=12))
    fields = [b"X: " + b"v" * n + b"\r\n" for n in values]
    head = line + b"".join(fields) + b"\r\n"
    if len(line) > SMALL.request_line:
        return head, 414
    total = 0
    for count, field in enumerate(fields, start=1):
        total += len(field)
        if total > SMALL.header_bytes or count > SMALL.headers:
            return head, 431
    return head, 431 if total + 2 > SMALL.header_bytes else None


@settings(max_examples=300, deadline=None)
@given(heads(), st.lists(st.integers(1, 40), max_size=30))
def test_the_scan_gives_the_same_verdict_for_any_split_into_reads(
    case: tuple[bytes, int | None], sizes: list[int]
) -> None:
    head, wanted = case
    scanner = HeadScanner(SMALL)
    verdict: int | None = None
    position = 0
    for size in [*sizes, len(head)]:
        refusal = scanner.feed(head[position : position + size])
        position += size
        if refusal is not None:
            verdict = refusal.status
            break
        if position >= len(head):
            break
    assert verdict == wanted
    assert scanner.done is (wanted is None)


@settings(max_examples=200, deadline=None)
@given(heads())
def test_a_head_is_refused_at_the_byte_that_crosses_a_limit(case: tuple[bytes, int | None]) -> None:
    head, wanted = case
    scanner = HeadScanner(SMALL)
    for index in range(len(head)):
        if scanner.feed(head[index : index + 1]) is not None:
            break
    else:
        assert wanted is None
        return
    assert wanted is not None
    line_end = head.index(b"\n") + 1
    if wanted == 414:
        assert index == SMALL.request_line  # the first byte over the request line's limit
    else:
        seen = head[line_end : index + 1]
        assert len(seen) == SMALL.header_bytes + 1 or seen.count(b"\n") == SMALL.headers + 1


@given(st.binary(max_size=2000))
def test_bytes_after_the_end_of_a_head_are_not_scanned(after: bytes) -> None:
    scanner = HeadScanner(SMALL)
    assert scanner.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + after) is None
    assert scanner.done


def test_a_head_that_began_unseen_shares_one_budget_and_is_never_414() -> None:
    """A pipelined head that began inside a read the scan did not see: its first line may be a header."""
    scanner = HeadScanner(SMALL)
    scanner.start(aligned=False)
    assert scanner.feed(b"a" * 100 + b"\r\n") is None  # over the request line's 64, not over 64 + 256
    refusal = scanner.feed(b"b" * 300)
    assert refusal is not None and refusal.status == 431 and "larger than 320 bytes" in refusal.message
    scanner.start(aligned=False)
    refusal = next(filter(None, (scanner.feed(b"X: y\r\n") for _ in range(SMALL.headers + 2))))
    assert refusal.code == "too_many_headers" and "more than 9 header fields" in refusal.message
