"""The serving process's runtime choices: uvloop when installed, a frozen start-up heap, the batching encoder."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator

import pytest

from routegate.cli.serve import _loop_factory, _run
from routegate.embed import BatchingEncoder, MiniLMEncoder
from routegate.server.encoder import serving_encoder
from routegate.server.heap import freeze_startup_heap
from routegate.settings import Settings


def test_the_server_runs_on_uvloop_when_it_is_installed() -> None:
    uvloop = pytest.importorskip("uvloop")
    assert _loop_factory() is uvloop.new_event_loop
    seen: list[str] = []

    async def main() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    _run(main())
    assert seen and seen[0].startswith("uvloop")


@pytest.fixture
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("unfrozen")
def test_freezing_the_start_up_heap_takes_it_out_of_collections() -> None:
    survivors = [[i] for i in range(1000)]  # long-lived, GC-tracked objects, like a loaded model's
    freeze_startup_heap()
    assert gc.get_freeze_count() >= len(survivors)
    assert not any(obj is survivors for obj in gc.get_objects())  # a full collection no longer walks them


def test_the_serving_encoder_batches_over_a_minilm_with_the_configured_threads() -> None:
    encoder = serving_encoder(Settings(server_encoder_threads=3))
    assert isinstance(encoder, BatchingEncoder)
    assert isinstance(encoder.inner, MiniLMEncoder) and encoder.inner.intra_op_num_threads == 3


@pytest.mark.parametrize("size", ["0", "101", "many"])
def test_a_bad_pool_size_is_refused_with_the_setting_named(monkeypatch: pytest.MonkeyPatch, size: str) -> None:
    from pydantic import ValidationError

    monkeypatch.setenv("ROUTEGATE_DB_POOL_SIZE", size)
    with pytest.raises(ValidationError, match="db_pool_size"):
        Settings()
