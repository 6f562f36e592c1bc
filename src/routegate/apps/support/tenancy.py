"""Which tenant the running code acts for: a context variable the server sets from the API key when a turn starts,
so that the desk's code below it (its connection pool's fair queue, :mod:`.fair_share`) needs no extra argument.
Code outside a server turn acts for the anonymous tenant ``""``. No dependencies: the server imports it whatever
desk it serves."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

ANONYMOUS: Final = ""
_tenant: ContextVar[str] = ContextVar("routegate_support_tenant", default=ANONYMOUS)


def current_tenant() -> str:
    """The tenant the running code acts for (``""`` outside a server turn)."""
    return _tenant.get()


@contextmanager
def acting_for(tenant: str) -> Iterator[None]:
    """Run the block, and the tasks it starts, as ``tenant``. Use it around synchronous code or inside a task of
    its own: a block that spans a ``yield`` of an async generator would leak the tenant to the generator's
    consumer."""
    token = _tenant.set(tenant)
    try:
        yield
    finally:
        _tenant.reset(token)
