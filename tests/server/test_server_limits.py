"""The fair-sharing limits on their own (:class:`routegate.server._fairness.TenantLimiter`), with an injected clock:
never more turns of a tenant running than its bound, never more started in any window than the bucket allows,
refusals that take nothing, and a table of tenants that stays small whoever calls."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from routegate.server._fairness import RATE_LIMITED, TOO_MANY_CONCURRENT_TURNS, Lease, Refused, TenantLimiter


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def _limiter(clock: Clock, *, max_concurrent: int = 0, rate: float = 0.0, burst: int = 1) -> TenantLimiter:
    return TenantLimiter(max_concurrent=max_concurrent, rate=rate, burst=burst, clock=clock)


# one step: let time pass, start a turn of a tenant, or end the i-th running turn
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("wait"), st.floats(min_value=0.0, max_value=3.0, allow_nan=False)),
        st.tuples(st.just("admit"), st.sampled_from(["a", "b", "c"])),
        st.tuples(st.just("end"), st.integers(min_value=0, max_value=50)),
    ),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(
    steps=_STEPS,
    max_concurrent=st.integers(min_value=0, max_value=6),
    rate=st.sampled_from([0.0, 0.5, 1.0, 3.0, 10.0]),
    burst=st.integers(min_value=1, max_value=8),
)
def test_never_more_running_than_the_bound_nor_started_than_the_bucket_allows(
    steps: list[tuple[str, object]], max_concurrent: int, rate: float, burst: int
) -> None:
    clock = Clock()
    limiter = _limiter(clock, max_concurrent=max_concurrent, rate=rate, burst=burst)
    running: list[tuple[str, Lease]] = []
    started: dict[str, list[float]] = {}
    for kind, arg in steps:
        if kind == "wait":
            assert isinstance(arg, float)
            clock.now += arg
        elif kind == "end" and running:
            assert isinstance(arg, int)
            _, lease = running.pop(arg % len(running))
            lease.release()
            lease.release()  # twice is once
        elif kind == "admit":
            assert isinstance(arg, str)
            verdict = limiter.admit(arg)
            if isinstance(verdict, Lease):
                running.append((arg, verdict))
                started.setdefault(arg, []).append(clock.now)
            else:
                assert verdict.retry_after >= 1
                if verdict.code == TOO_MANY_CONCURRENT_TURNS:
                    assert max_concurrent and limiter.running(arg) == max_concurrent
                else:
                    assert verdict.code == RATE_LIMITED and rate > 0
        for tenant in ("a", "b", "c"):
            now_running = sum(1 for t, _ in running if t == tenant)
            assert limiter.running(tenant) == (now_running if limiter.enabled else 0)  # no limit: nothing counted
            if max_concurrent:
                assert now_running <= max_concurrent
    if rate:
        for times in started.values():  # every window [times[i], times[j]]: at most burst + rate * its length
            for i in range(len(times)):
                for j in range(i, len(times)):
                    assert j - i + 1 <= burst + rate * (times[j] - times[i]) + 1e-6


def test_the_bucket_refuses_with_the_wait_until_the_next_token() -> None:
    clock = Clock()
    limiter = _limiter(clock, rate=0.25, burst=2)
    assert isinstance(limiter.admit("a"), Lease)
    assert isinstance(limiter.admit("a"), Lease)
    refused = limiter.admit("a")
    assert isinstance(refused, Refused)
    assert (refused.code, refused.retry_after) == (RATE_LIMITED, 4)  # one token per 4 s
    assert "faster than 0.25 per second (burst 2)" in refused.message
    clock.now += 3.0
    refused = limiter.admit("a")
    assert isinstance(refused, Refused) and refused.retry_after == 1
    clock.now += 1.0
    assert isinstance(limiter.admit("a"), Lease)
    assert isinstance(limiter.admit("b"), Lease)  # another tenant has its own bucket


def test_a_turn_refused_for_concurrency_takes_no_token_and_an_ended_turn_frees_its_place() -> None:
    clock = Clock()
    limiter = _limiter(clock, max_concurrent=1, rate=1.0, burst=2)
    first = limiter.admit("a")
    assert isinstance(first, Lease)
    for _ in range(5):
        refused = limiter.admit("a", who="this API key")
        assert isinstance(refused, Refused)
        assert refused.code == TOO_MANY_CONCURRENT_TURNS and refused.retry_after == 1
        assert refused.message.startswith("this API key already has 1 turns running")
    first.release()
    assert isinstance(limiter.admit("a"), Lease)  # the second token was not spent by the refusals


def test_zero_means_no_limit() -> None:
    limiter = _limiter(Clock(), max_concurrent=0, rate=0.0, burst=1)
    leases = [limiter.admit("a") for _ in range(1000)]
    assert all(isinstance(lease, Lease) for lease in leases)
    assert len(limiter) == 0  # nothing is tracked


def test_the_table_of_tenants_stays_small_under_a_stream_of_new_addresses() -> None:
    clock = Clock()
    limiter = _limiter(clock, max_concurrent=4, rate=10.0, burst=5)
    for n in range(20_000):
        lease = limiter.admit(f"address:10.0.{n // 250}.{n % 250}")
        assert isinstance(lease, Lease)
        lease.release()
        clock.now += 0.01
    assert len(limiter) <= 2048
    # a tenant that is still running, or whose bucket is not full again, is kept: pruning never resets a limit
    busy = limiter.admit("key:busy")
    assert isinstance(busy, Lease)
    for n in range(5000):
        limiter.admit(f"address:192.168.{n // 250}.{n % 250}")
    assert limiter.running("key:busy") == 1


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="burst >= 1"):
        TenantLimiter(max_concurrent=1, rate=1.0, burst=0)
