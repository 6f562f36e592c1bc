"""Keep Python's cyclic garbage collector off the start-up heap of a server process.

A started desk holds hundreds of thousands of long-lived objects (the fitted router, the tokenizer, the app and its
schemas). Every full (generation 2) collection walks all of them: under load that was a 120-270 ms pause of the
event loop several times a minute, i.e. the whole p99 of ``/chat`` (measured in docs/benchmarks/server.md).
:func:`freeze_startup_heap` collects once and then moves everything alive into the permanent generation
(:func:`gc.freeze`), which collections skip; objects created per request are still collected as before.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Collect once, then exempt every object alive now from future collections. Call when start-up is done."""
    gc.collect()
    gc.freeze()
