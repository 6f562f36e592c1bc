"""The desk's database connections are shared round robin between tenants (FairShare, in front of the pool): a
flooding tenant's queue does not delay another tenant by more than one release per waiting tenant; a wait ends
only when no connection comes free for the stall bound (or the overall bound); a caller that gives up leaves no
slot behind."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from psycopg_pool import PoolTimeout

from routegate.apps.support.fair_share import FairShare


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_a_second_tenant_is_served_before_the_floods_queue() -> None:
    async def main() -> list[str]:
        share = FairShare(1, stall_seconds=30, max_wait_seconds=60)
        await share.acquire("A")  # A holds the only slot
        order: list[str] = []
        served = asyncio.Event()

        async def wait(tenant: str) -> None:
            await share.acquire(tenant)
            order.append(tenant)
            served.set()

        waiters = [asyncio.create_task(wait("A")) for _ in range(20)]
        await asyncio.sleep(0)  # one turn of the loop: every new task runs up to its wait, so the flood queues first
        waiters.append(asyncio.create_task(wait("B")))
        await asyncio.sleep(0)
        assert share.waiting("A") == 20 and share.waiting("B") == 1
        while len(order) < 21:
            served.clear()
            share.release()  # the slot goes to the next waiter, who records it
            await served.wait()
        await asyncio.gather(*waiters)
        share.release()
        assert share.free == 1 and share.waiting() == 0
        return order

    order = run(main())
    assert isinstance(order, list)
    # one waiting tenant before B: B is served by the second release, not after A's twenty
    assert order.index("B") <= 1, order


def test_a_queue_that_moves_keeps_waiting_past_the_stall_bound() -> None:
    """Forty callers of one tenant share one slot, each holding it briefly: together they wait far longer than the
    stall bound, and none is turned away, because a slot keeps coming free."""

    async def main() -> int:
        share = FairShare(1, stall_seconds=0.5, max_wait_seconds=60)
        done = 0

        async def turn() -> None:
            nonlocal done
            await share.acquire("A")
            try:
                await asyncio.sleep(0.02)
            finally:
                share.release()
            done += 1

        await asyncio.gather(*(turn() for _ in range(40)))
        return done

    assert run(main()) == 40


def test_a_stuck_pool_ends_the_wait_as_pool_timeout() -> None:
    async def main() -> None:
        share = FairShare(2, stall_seconds=0.05, max_wait_seconds=60)
        await share.acquire("A")
        await share.acquire("A")  # both held, never released
        with pytest.raises(PoolTimeout, match=r"no database connection came free for 0\.05 s"):
            await share.acquire("B")
        assert share.waiting() == 0 and share.free == 0

    run(main())


def test_the_overall_bound_ends_even_a_moving_queue() -> None:
    async def main() -> None:
        share = FairShare(1, stall_seconds=30, max_wait_seconds=0.05)
        await share.acquire("A")
        with pytest.raises(PoolTimeout, match=r"within 0\.05 s"):
            await share.acquire("B")
        share.release()
        assert share.free == 1

    run(main())


def test_a_cancelled_waiter_leaves_no_slot_behind() -> None:
    async def main() -> None:
        share = FairShare(1, stall_seconds=30, max_wait_seconds=60)
        await share.acquire("A")
        waiter = asyncio.create_task(share.acquire("B"))
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert share.waiting() == 0
        share.release()
        assert share.free == 1

    run(main())


def test_a_slot_granted_to_a_caller_that_was_cancelled_passes_on() -> None:
    async def main() -> None:
        share = FairShare(1, stall_seconds=30, max_wait_seconds=60)
        await share.acquire("A")
        first = asyncio.create_task(share.acquire("B"))
        second = asyncio.create_task(share.acquire("C"))
        await asyncio.sleep(0)
        share.release()  # granted to B ...
        first.cancel()  # ... which gives up before it runs
        with pytest.raises(asyncio.CancelledError):
            await first
        await second  # C has the slot B could not take
        assert share.free == 0 and share.waiting() == 0
        share.release()
        assert share.free == 1

    run(main())


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="capacity >= 1"):
        FairShare(0, stall_seconds=1, max_wait_seconds=1)


# -- the invariants under any interleaving -----------------------------------------------------------------------

_op = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from("ABC")),
    st.tuples(st.just("release"), st.integers(0, 20)),
    st.tuples(st.just("cancel"), st.integers(0, 20)),
)


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(1, 3), ops=st.lists(_op, max_size=40))
def test_slots_are_never_lost_or_doubled(capacity: int, ops: list[tuple[str, object]]) -> None:
    async def main() -> None:
        share = FairShare(capacity, stall_seconds=30, max_wait_seconds=60)
        tasks: list[asyncio.Task[None]] = []
        holding: list[asyncio.Task[None]] = []
        released: set[int] = set()

        def settled() -> None:
            for task in tasks:
                if task.done() and not task.cancelled() and id(task) not in released and task not in holding:
                    holding.append(task)

        for op, arg in ops:
            if op == "acquire":
                tasks.append(asyncio.create_task(share.acquire(str(arg))))
            elif op == "release" and holding:
                task = holding.pop(int(str(arg)) % len(holding))
                released.add(id(task))
                share.release()
            elif op == "cancel":
                waiting = [t for t in tasks if not t.done()]
                if waiting:
                    waiting[int(str(arg)) % len(waiting)].cancel()
            for _ in range(3):
                await asyncio.sleep(0)
            settled()
            assert len(holding) + share.free == capacity
            assert share.free == 0 or share.waiting() == 0
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        settled()
        for _ in holding:
            share.release()
        assert share.free == capacity and share.waiting() == 0

    asyncio.run(main())
