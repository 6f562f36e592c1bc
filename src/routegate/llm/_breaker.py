"""A circuit breaker for one model endpoint: after a failure that says the endpoint is away, calls fail at once
(no connection attempt) for ``open_seconds``, then one trial call is let through.

States: ``closed`` (calls go through), ``open`` (calls fail at once with the stop signal of the failure that
opened it), ``half_open`` (the window has passed: the next call is the trial; its success closes the breaker,
its failure opens it again for another window; concurrent calls meanwhile still fail at once).

Only failures that say the endpoint cannot serve now open it: unreachable (``llm_error:connect``), no answer in
time (``llm_timeout``), refused credentials (``llm_error:auth``), rate limited or HTTP 5xx after the retries
(``llm_error:rate_limited``, ``llm_error:upstream`` with a 5xx status). A refused request (HTTP 4xx) or an
unusable answer came from a working endpoint and leaves the breaker as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Literal

from routegate.llm.errors import LLMError
from routegate.llm.protocol import ModelHealth

BreakerState = Literal["closed", "open", "half_open"]


class CircuitBreaker:
    """The breaker of one endpoint. ``open_seconds``: how long calls fail at once after a failure (``0``: never,
    the breaker only reports health); ``clock``: monotonic seconds (injectable for tests)."""

    def __init__(self, *, open_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        if not open_seconds >= 0:
            raise ValueError(f"open_seconds must be >= 0, got {open_seconds!r}")
        self.open_seconds = float(open_seconds)
        self._clock = clock
        self._opened_at: float | None = None
        self._last: LLMError | None = None
        self._trial_at: float | None = None
        self.failures = 0
        self.refused = 0  # calls failed at once while open

    @property
    def state(self) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        now = self._clock()
        # a trial call in flight keeps it open; one that never reported (cancelled) is forgotten after a window
        if self._trial_at is not None and now - self._trial_at < self.open_seconds:
            return "open"
        if now - self._opened_at < self.open_seconds:
            return "open"
        return "half_open"

    @property
    def health(self) -> ModelHealth:
        state = self.state
        if state == "open":
            return "down"
        if state == "half_open" or self._last is not None:
            return "degraded"
        return "ok"

    def before_call(self) -> LLMError | None:
        """``None`` when the call may go ahead (closed, or this is the half-open trial), else the stop signal to
        raise at once: the same kind as the failure that opened the breaker, saying when it retries."""
        state = self.state
        if state == "closed":
            return None
        if state == "half_open":
            self._trial_at = self._clock()
            return None
        last = self._last
        assert last is not None and self._opened_at is not None  # open implies a recorded failure
        self.refused += 1
        wait = max(0.0, self.open_seconds - (self._clock() - self._opened_at))
        retry = "after the current trial call" if self._trial_at is not None else f"in {wait:.1f} s"
        return type(last)(
            f"not tried: the model endpoint failed {self._clock() - self._opened_at:.1f} s ago ({last.stop_reason}: "
            f"{last.message}); the next attempt is {retry} (ROUTEGATE_LLM_BREAKER_SECONDS={self.open_seconds:g})",
            status_code=last.status_code,
        )

    def succeeded(self) -> None:
        self._opened_at = None
        self._last = None
        self._trial_at = None

    def failed(self, stop: LLMError) -> None:
        """Record a failed call; one that says the endpoint is away opens the breaker."""
        self._trial_at = None
        if not stop.unavailable:
            if self._opened_at is not None:  # the trial reached a working endpoint: close
                self._opened_at = None
                self._last = None
            return
        self.failures += 1
        self._last = stop
        self._opened_at = self._clock()
