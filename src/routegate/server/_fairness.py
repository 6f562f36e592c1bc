"""Fair sharing between tenants: per tenant, a bound on the turns running at once and a token bucket on the rate
at which it starts them. A turn over either is refused at once (the server answers 429 with ``Retry-After``), so
one tenant's flood costs the others only the turns it is allowed and the refusals of the rest.

A tenant is an API key (its owner id); on a server without keys, a client address. The limits hold per server
process: ``routegate serve --workers N`` lets a tenant run N times as many. Time comes from an injected clock
(``time.monotonic`` by default), so the arithmetic is tested without sleeping.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

RATE_LIMITED: Final = "rate_limited"
TOO_MANY_CONCURRENT_TURNS: Final = "too_many_concurrent_turns"
RefusalCode = Literal["rate_limited", "too_many_concurrent_turns"]

CONCURRENT_RETRY_SECONDS: Final = 1
"""What ``Retry-After`` says when the tenant's turns are all running: a turn usually ends well within a second."""
_PRUNE_AT_LEAST: Final = 1024


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a turn may not start: ``code`` (the error code the client reads) and whole seconds to wait."""

    code: RefusalCode
    retry_after: int
    message: str


@dataclass(slots=True)
class _Tenant:
    tokens: float
    stamp: float
    running: int = 0


class Lease:
    """A turn's place among its tenant's running turns; :meth:`release` gives it back (once, whoever calls).
    ``tenant`` names whose turn it is (the desk's database queues fairly between tenants)."""

    __slots__ = ("_state", "released", "tenant")

    def __init__(self, state: _Tenant | None, tenant: str = "") -> None:
        self._state = state
        self.tenant = tenant
        self.released = False

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        if self._state is not None:
            self._state.running -= 1


class TenantLimiter:
    """Per tenant: at most ``max_concurrent`` turns running (0: no bound) and a token bucket of ``burst`` tokens
    refilled at ``rate`` per second (0: no bound); a turn takes one token when it starts.

    The table of tenants stays small whoever calls: a tenant with no turn running and a full bucket is the same
    as one never seen, and such entries are dropped whenever the table has doubled since the last sweep."""

    def __init__(
        self,
        *,
        max_concurrent: int,
        rate: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_concurrent < 0 or rate < 0 or burst < 1:
            raise ValueError(
                f"tenant limits must be max_concurrent >= 0, rate >= 0, burst >= 1; "
                f"got {max_concurrent}, {rate}, {burst}"
            )
        self.max_concurrent = max_concurrent
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tenants: dict[str, _Tenant] = {}
        self._prune_at = _PRUNE_AT_LEAST

    @property
    def enabled(self) -> bool:
        return self.max_concurrent > 0 or self.rate > 0

    def __len__(self) -> int:
        """How many tenants the table holds right now."""
        return len(self._tenants)

    def running(self, tenant: str) -> int:
        state = self._tenants.get(tenant)
        return 0 if state is None else state.running

    def admit(self, tenant: str, *, who: str = "this API key") -> Lease | Refused:
        """A lease for one turn of ``tenant``, or why not (nothing is taken then). ``who`` names the tenant in
        the refusal's message."""
        if not self.enabled:
            return Lease(None, tenant)
        now = self._clock()
        state = self._tenants.get(tenant)
        if state is None:
            if len(self._tenants) >= self._prune_at:
                self._prune(now)
            state = self._tenants[tenant] = _Tenant(tokens=float(self.burst), stamp=now)
        self._refill(state, now)
        if self.max_concurrent and state.running >= self.max_concurrent:
            return Refused(
                TOO_MANY_CONCURRENT_TURNS,
                CONCURRENT_RETRY_SECONDS,
                f"{who} already has {state.running} turns running, the limit per server process "
                f"(ROUTEGATE_TENANT_MAX_CONCURRENT_TURNS={self.max_concurrent}); wait for one to finish",
            )
        if self.rate and state.tokens < 1.0:
            wait = max(1, math.ceil((1.0 - state.tokens) / self.rate))
            return Refused(
                RATE_LIMITED,
                wait,
                f"{who} started turns faster than {self.rate:g} per second (burst {self.burst}), the limit per "
                f"server process (ROUTEGATE_TENANT_RATE_PER_SECOND); retry after {wait} s",
            )
        if self.rate:
            state.tokens -= 1.0
        state.running += 1
        return Lease(state, tenant)

    def _refill(self, state: _Tenant, now: float) -> None:
        if self.rate:
            state.tokens = min(float(self.burst), state.tokens + max(0.0, now - state.stamp) * self.rate)
        state.stamp = now

    def _prune(self, now: float) -> None:
        for tenant, state in list(self._tenants.items()):
            if state.running == 0:
                self._refill(state, now)
                if state.tokens >= self.burst:
                    del self._tenants[tenant]
        self._prune_at = max(_PRUNE_AT_LEAST, 2 * len(self._tenants))
