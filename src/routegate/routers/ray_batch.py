"""Batch routing and evaluation on Ray Data (the ``routegate[ray]`` extra): ``routegate route --file F --ray`` and
``routegate eval F --router R --ray``.

The rows are split into batches and handed to a pool of Ray actors (``Dataset.map_batches`` with a callable
class): each actor builds its worker once (the router and its encoder load once per actor, not per batch) and
routes a whole batch per call, with one batched encoder pass. Results come back in input order
(``preserve_order``), so the output is the single-process run's, row for row; progress is reported per batch.

Ray is imported inside the functions that need it, never on the default path; without the extra the error says
``python -m pip install 'routegate[ray]'``. :func:`ray_session` starts a local cluster (loopback, no dashboard, bounded CPUs)
or joins the one ``RAY_ADDRESS`` names.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from routegate._extras import needs
from routegate.errors import ConfigurationError
from routegate.routers.data import OOS_LABEL, LabelledExample
from routegate.routers.evaluation import (
    EvalReport,
    Progress,
    UnknownLabels,
    known_labels,
    score_decisions,
    score_separation,
)

BatchWorker = Callable[[list[Any]], list[Any]]
"""Routes a batch of items; returns one result per item, in order."""


LOCAL_ONLY_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
"""Ray's switch for a single-machine cluster (its default on macOS and Windows): set to ``0``, the node's address
is loopback and Ray binds every server of the node there. Ray reads it when it is imported."""
AUTH_MODE_ENV = "RAY_AUTH_MODE"
"""Ray's authentication switch: ``token`` (a new local cluster's default since Ray 2.5x) makes every call to the
cluster's servers carry the cluster's token (``~/.ray/auth_token``)."""


def import_ray() -> Any:
    """``ray``, or :class:`~routegate.errors.MissingExtraError` naming the extra to install. When no
    ``RAY_ADDRESS`` names a cluster to join, Ray's single-machine switch (:data:`LOCAL_ONLY_ENV`) and its token
    authentication (:data:`AUTH_MODE_ENV`) are set first, unless the environment sets them: a cluster
    :func:`ray_session` starts then stays on loopback, and asks for its token."""
    if not os.environ.get("RAY_ADDRESS"):
        os.environ.setdefault(LOCAL_ONLY_ENV, "0")
        os.environ.setdefault(AUTH_MODE_ENV, "token")
    with needs("ray"):
        import ray
    return ray


@contextmanager
def ray_session(*, num_cpus: int | None = None) -> Iterator[Any]:
    """Ray, initialised for the block: joins ``RAY_ADDRESS`` when it is set, else starts a local cluster on
    loopback (``num_cpus`` CPUs, default all; no dashboard) and shuts it down at the end. A Ray already
    initialised in this process (a test fixture, a notebook) is used as it is and left running.

    The local cluster listens on loopback only — its GCS, raylet, object manager, agents, dashboard, every
    worker's port: Ray's head runs whatever jobs it is sent, so it must not be reachable from the network unless the
    user says so (``ray start --head`` on an address of their choosing, then ``RAY_ADDRESS``).
    ``ray.init(_node_ip_address="127.0.0.1")`` is not enough: Ray replaces a loopback node address with the
    machine's own, and binds its servers to every interface. Ray's single-machine switch (:data:`LOCAL_ONLY_ENV` =
    ``0``, set by :func:`import_ray`) keeps the node on loopback; it must be set before Ray is imported, so a local
    cluster whose node address is not loopback anyway is refused rather than kept. Each Ray Serve replica's
    inter-deployment gRPC server, which Ray's code binds to every interface, is rebound to loopback by the replica
    (:mod:`routegate.server.ray_loopback`). Loopback keeps the network out; the cluster's token keeps out the
    machine's other users, so a local cluster is not started with Ray's token authentication switched off
    (``RAY_AUTH_MODE=disabled``)."""
    ray = import_ray()  # sets the single-machine switch when there is no cluster to join
    if ray.is_initialized():
        yield ray
        return
    address = os.environ.get("RAY_ADDRESS") or None
    if address is None and os.environ.get(AUTH_MODE_ENV, "").strip().lower() == "disabled":
        raise ConfigurationError(
            f"{AUTH_MODE_ENV}=disabled: routegate does not start a local Ray cluster without Ray's token "
            "authentication (its servers, its jobs API among them, would answer every process on this machine); unset "
            f"{AUTH_MODE_ENV} (or set it to token), or start a cluster yourself and set RAY_ADDRESS"
        )
    options: dict[str, Any] = {"log_to_driver": False, "logging_level": "WARNING"}
    if address is None:  # a cluster of our own (joining one, these are the cluster's to set)
        options.update(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False, dashboard_host="127.0.0.1")
    ray.init(address=address, **options)
    try:
        if address is None:
            _check_loopback(ray)
        yield ray
    finally:
        ray.shutdown()


def _check_loopback(ray: Any) -> None:
    """Refuse a local cluster whose node is not on loopback (Ray was imported before the switch was set, or the
    environment sets it otherwise): its servers would listen on every interface."""
    node = str(ray.util.get_node_ip_address())
    if ipaddress.ip_address(node).is_loopback:
        return
    raise ConfigurationError(
        f"the local Ray cluster came up on {node}, not on loopback, so its servers are reachable from the network; "
        f"routegate sets {LOCAL_ONLY_ENV}=0 before importing Ray to keep it on this machine: import Ray after "
        f"routegate starts it (or unset {LOCAL_ONLY_ENV}), or start a cluster yourself (ray start --head) on the "
        "address you choose and set RAY_ADDRESS"
    )


class _BatchActor:
    """One Ray Data actor: builds its worker once, then routes batch after batch."""

    def __init__(self, make_worker: Callable[[], BatchWorker]) -> None:
        self.worker = make_worker()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        with needs("embed"):
            import numpy as np

        items = [pickle.loads(blob) for blob in batch["item"]]
        results = self.worker(items)
        if len(results) != len(items):
            raise RuntimeError(f"a batch worker returned {len(results)} results for {len(items)} items")
        out = np.empty(len(results), dtype=object)
        out[:] = [pickle.dumps(r) for r in results]
        return {"index": batch["index"], "result": out}


def map_in_order(
    items: Sequence[Any],
    make_worker: Callable[[], BatchWorker],
    *,
    batch_size: int = 256,
    actors: int | None = None,
    progress: Progress | None = None,
) -> Iterator[Any]:
    """The results of ``make_worker()(batch)`` over ``items`` in batches, yielded in input order, computed by
    ``actors`` Ray actors (default: one per CPU of the cluster). Needs an initialised Ray (:func:`ray_session`);
    ``make_worker`` is sent to the actors (cloudpickle), so it must not capture open files or connections."""
    ray = import_ray()
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be at least 1 (got {batch_size})")
    if actors is not None and actors < 1:
        raise ConfigurationError(f"--ray-actors must be at least 1 (got {actors})")
    total = len(items)
    if total == 0:
        return
    pool = actors or max(1, int(ray.cluster_resources().get("CPU", 1)))
    pool = max(1, min(pool, -(-total // batch_size)))  # no idle actors loading a model for nothing
    with needs("ray"):  # ray installed without Ray Data
        from ray.data import DataContext

    logging.getLogger("ray.data").setLevel(logging.ERROR)  # our progress bar and errors say what matters
    context = DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    rows = [{"index": i, "item": pickle.dumps(item)} for i, item in enumerate(items)]
    dataset = ray.data.from_items(rows, override_num_blocks=-(-total // batch_size)).map_batches(
        _BatchActor,
        fn_constructor_args=(make_worker,),
        batch_size=batch_size,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=pool),
        num_cpus=1,
    )
    expected = 0
    for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
        for index, blob in zip(batch["index"], batch["result"], strict=True):
            if int(index) != expected:  # preserve_order is the contract; never print rows out of order
                raise RuntimeError(f"Ray Data returned row {int(index)} where row {expected} was expected")
            expected += 1
            yield pickle.loads(blob)
        if progress is not None:
            progress(expected, total)
    if expected != total:
        raise RuntimeError(f"Ray Data returned {expected} of {total} rows")


def _semantic_worker(router_dir: str, threads: int) -> BatchWorker:
    """Loads the saved router once; routes each batch with one encoder pass, timing it."""
    from routegate.routers.persist import saved_encoder
    from routegate.routers.semantic import SemanticRouter

    router = SemanticRouter.load(router_dir, encoder=saved_encoder(router_dir, intra_op_num_threads=threads))
    router.route("warm up")  # load the encoder before timing

    def route_batch(texts: list[str]) -> list[Any]:
        started = time.perf_counter()
        vectors = router.encoder.encode(texts)  # one batched pass (row for row what single calls give)
        # the head row by row, as route() does: a matrix product over the batch rounds differently in the last bits
        decisions = [router._decide(vectors[i : i + 1], [text], None)[0] for i, text in enumerate(texts)]
        share = (time.perf_counter() - started) * 1000 / max(1, len(texts))
        return [(decision, share) for decision in decisions]

    return route_batch


def evaluate_on_ray(
    router_dir: str | Path,
    examples: Sequence[LabelledExample],
    *,
    routes: Sequence[str],
    default_route: str,
    oos_label: str = OOS_LABEL,
    unknown_labels: UnknownLabels = "refuse",
    progress: Progress | None = None,
    batch_size: int = 256,
    actors: int | None = None,
    threads: int = 1,
) -> EvalReport:
    """:func:`~routegate.routers.evaluation.evaluate` with the routing done by Ray actors, in batches: the same
    report, except latency, which is each query's share of its batch's encoder pass (not a single-query call).
    Needs an initialised Ray (:func:`ray_session`)."""
    labels, unknown = known_labels(examples, routes, oos_label=oos_label, unknown_labels=unknown_labels)
    path = str(Path(router_dir).resolve())

    def make_worker() -> BatchWorker:
        return _semantic_worker(path, threads)

    decisions, latencies = [], []
    texts = [e.text for e in examples]
    for decision, latency in map_in_order(texts, make_worker, batch_size=batch_size, actors=actors, progress=progress):
        decisions.append(decision)
        latencies.append(latency)
    report = score_decisions(decisions, labels, default_route, latencies, oos_label=oos_label)
    # each score's AUROC, as the single-process report gives: the saved router's scores on the driver, batched
    from routegate.routers.persist import saved_encoder
    from routegate.routers.semantic import SemanticRouter

    router = SemanticRouter.load(path, encoder=saved_encoder(path, intra_op_num_threads=threads))
    return replace(report, unknown_as_oos=unknown, **score_separation(router, texts, labels, oos_label=oos_label))
