"""Routing as steps: one computation per query, driven on the caller's thread or off the event loop.

A router's work on one query is a generator (:data:`Routing`) that yields the texts it needs embedded and is sent
their vectors back; it returns the decision. :func:`drive` runs it embedding on this thread, :func:`adrive`
embedding off the event loop. :class:`SteppedRouter` gives a router its ``route`` and ``aroute`` from its one
:meth:`~SteppedRouter.routing`, so the two can never decide differently.
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from routegate.embed.batching import encode_async
from routegate.embed.protocol import Encoder, Vectors

R = TypeVar("R")
Routing = Generator[list[str], Vectors, R]
"""A routing computation that yields the texts it needs embedded and is sent back their vectors."""


@dataclass(frozen=True, slots=True)
class RoutingQuery:
    """One query to route. ``context``: the conversation so far (user texts, or role/content messages, oldest
    first); ``previous_route``: the route of the turn before; ``allowed``: the routes it may take (``None``: all)."""

    text: str
    context: Sequence[object] = ()
    previous_route: str | None = None
    allowed: Collection[str] | None = None


def drive(steps: Routing[R], encoder: Encoder) -> R:
    """Run ``steps`` embedding on this thread (``encoder.encode``)."""
    try:
        texts = next(steps)
        while True:
            texts = steps.send(encoder.encode(texts))
    except StopIteration as done:
        result: R = done.value
        return result


async def adrive(steps: Routing[R], encoder: Encoder) -> R:
    """Run ``steps`` embedding off the event loop (:func:`~routegate.embed.batching.encode_async`)."""
    try:
        texts = next(steps)
        while True:
            texts = steps.send(await encode_async(encoder, texts))
    except StopIteration as done:
        result: R = done.value
        return result


class SteppedRouter(Generic[R]):
    """A router whose decision is one :meth:`routing` computation; :meth:`route` and :meth:`aroute` drive it."""

    encoder: Encoder

    def routing(self, query: RoutingQuery) -> Routing[R]:
        """The routing of ``query`` as steps (see :data:`Routing`)."""
        raise NotImplementedError

    def route(
        self,
        text: str,
        *,
        context: Sequence[object] = (),
        previous_route: str | None = None,
        allowed: Collection[str] | None = None,
    ) -> R:
        """Route one query, embedding on this thread (see :class:`RoutingQuery` for the arguments)."""
        return drive(self.routing(RoutingQuery(str(text), context, previous_route, allowed)), self.encoder)

    async def aroute(
        self,
        text: str,
        *,
        context: Sequence[object] = (),
        previous_route: str | None = None,
        allowed: Collection[str] | None = None,
    ) -> R:
        """:meth:`route` for coroutines: the encoder runs off the event loop (in a shared pass when it batches);
        the router's own arithmetic stays on the caller's thread."""
        return await adrive(self.routing(RoutingQuery(str(text), context, previous_route, allowed)), self.encoder)
