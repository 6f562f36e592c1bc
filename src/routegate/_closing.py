"""``async with`` for the clients that hold connections or processes: leaving the block closes them."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class ClosedOnExit:
    """``async with client:`` hands back the client itself and awaits its ``aclose()`` when the block ends,
    however it ends. A subclass defines ``aclose()``."""

    __slots__ = ()

    async def aclose(self) -> None:
        raise NotImplementedError  # pragma: no cover - every subclass defines it

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
