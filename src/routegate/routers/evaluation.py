"""Evaluating a semantic router on labelled data: accuracy, out-of-scope detection, latency, curves.

* in-scope accuracy: in-scope queries routed to their label (a ``clarify`` or ``default`` counts as wrong);
  top-1 accuracy: in-scope queries whose best-scoring route is their label, whatever the thresholds did;
  default-route rate: the share of in-scope queries sent to the default route (the cost of OOS detection);
* out-of-scope precision / recall / F1: ``default`` outcomes vs. rows labelled ``oos``; OOS AUROC / AUPR: how well
  the router's confidence separates out-of-scope from in-scope queries over every threshold (threshold-free), and
  ``threshold`` — the operating point the figures above were measured at;
* OOS AUROC of each score the router computes (``auroc_by_score``: ``p_top``, ``knn``, ``mahalanobis``, ``energy``
  and ``confidence``, the one it decides with), so a user sees which one their data favours;
* the cascade's unsure band (``cascade``): the queries a :class:`~routegate.routers.cascade.CascadeRouter` over this
  router would send to its LLM stage (outcome ``default`` or ``clarify``), how many are in scope, and the accuracy
  over all queries without that stage and with an oracle in it — the most a model tier there can add;
* per-route precision / recall and the confusion counts (label → predicted → count, non-zero cells only);
* latency p50 / p99 of single-query :meth:`~routegate.routers.semantic.SemanticRouter.route` calls;
* the risk–coverage curve (queries sorted by confidence; risk = share of wrong among those routed) and the
  out-of-scope trade-off curve (in-scope accuracy vs. OOS recall over thresholds).

A figure the data cannot define is ``None`` (``null`` in JSON), never ``0.0``, with the reason in ``undefined``:
OOS recall and AUROC/AUPR without out-of-scope rows, OOS precision when no query was sent to the default route,
in-scope figures without in-scope rows.

Data the router cannot be scored on is refused, not scored as zeros: no examples at all, or labels that are neither
one of the router's routes nor the out-of-scope label (listed in the error). ``unknown_labels="oos"`` (``routegate
eval --unknown-as-oos``) scores such rows as out of scope instead, and the report counts them per label
(``unknown_as_oos``).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TextIO

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.errors import ConfigurationError
from routegate.routers.data import OOS_LABEL, LabelledExample
from routegate.routers.semantic import SemanticDecision, SemanticRouter

Progress = Callable[[int, int], None]
UnknownLabels = Literal["refuse", "oos"]


def progress_bar(stream: TextIO = sys.stderr, *, width: int = 30, label: str = "eval") -> Progress:
    """A minimal progress bar for long runs, written to ``stream`` (stderr by default)."""
    state = {"last": -1}

    def update(done: int, total: int) -> None:
        pct = int(100 * done / total) if total else 100
        if pct == state["last"] and done != total:
            return
        state["last"] = pct
        filled = int(width * done / total) if total else width
        stream.write(f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
        if done >= total:
            stream.write("\n")
        stream.flush()

    return update


@dataclass(frozen=True, slots=True)
class CascadeBand:
    """The queries a cascade over this router would send to its LLM stage (outcome ``default`` or ``clarify``).

    ``accuracy``: over all queries, an in-scope query routed to its label or an out-of-scope one sent to the default
    route (a ``clarify`` counts as wrong); ``oracle_accuracy``: the same when every query in the band is answered
    right — the ceiling an LLM stage can reach; the gap is what a model tier can add, at ``share`` of the calls."""

    queries: int
    share: float
    in_scope: int
    out_of_scope: int
    accuracy: float
    oracle_accuracy: float

    def to_dict(self) -> dict[str, float | int]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def summary_lines(self) -> list[str]:
        return [
            f"cascade LLM band    {self.queries} queries ({self.share:.4f}): {self.in_scope} in scope, "
            f"{self.out_of_scope} out of scope",
            f"accuracy (all)      {self.accuracy:.4f} without an LLM stage, {self.oracle_accuracy:.4f} with an oracle "
            "in the band",
        ]


def cascade_band(
    outcome: np.ndarray[Any, Any], right: np.ndarray[Any, Any], is_oos: np.ndarray[Any, Any]
) -> CascadeBand:
    """The band of ``default`` and ``clarify`` outcomes; ``right``: the query's outcome is right on its own."""
    band = (outcome == "default") | (outcome == "clarify")
    n = len(outcome)
    return CascadeBand(
        queries=int(band.sum()),
        share=float(band.mean()) if n else 0.0,
        in_scope=int((band & ~is_oos).sum()),
        out_of_scope=int((band & is_oos).sum()),
        accuracy=float(right.mean()) if n else 0.0,
        oracle_accuracy=float((right | band).mean()) if n else 0.0,
    )


@dataclass(frozen=True, slots=True)
class EvalReport:
    n: int
    n_in_scope: int
    n_oos: int
    in_scope_accuracy: float | None
    oos_precision: float | None
    oos_recall: float | None
    oos_f1: float | None
    clarify_rate: float
    latency_ms_p50: float
    latency_ms_p99: float
    per_route: dict[str, dict[str, float]] = field(default_factory=dict)
    confusion: dict[str, dict[str, int]] = field(default_factory=dict)
    risk_coverage: list[tuple[float, float]] = field(default_factory=list)
    tradeoff: list[dict[str, float]] = field(default_factory=list)
    unknown_as_oos: dict[str, int] = field(default_factory=dict)
    top1_accuracy: float | None = None
    default_route_rate: float | None = None
    oos_auroc: float | None = None
    oos_aupr: float | None = None
    threshold: float | None = None
    undefined: dict[str, str] = field(default_factory=dict)  # metric -> why the data does not define it
    auroc_by_score: dict[str, float] = field(default_factory=dict)
    method: str | None = None  # the score the router decides with (its calibration's method)
    cascade: CascadeBand | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "n_in_scope": self.n_in_scope,
            "n_oos": self.n_oos,
            "in_scope_accuracy": self.in_scope_accuracy,
            "top1_accuracy": self.top1_accuracy,
            "default_route_rate": self.default_route_rate,
            "oos_precision": self.oos_precision,
            "oos_recall": self.oos_recall,
            "oos_f1": self.oos_f1,
            "oos_auroc": self.oos_auroc,
            "oos_aupr": self.oos_aupr,
            "threshold": self.threshold,
            "clarify_rate": self.clarify_rate,
            "latency_ms_p50": self.latency_ms_p50,
            "latency_ms_p99": self.latency_ms_p99,
            "undefined": self.undefined,
            "method": self.method,
            "auroc_by_score": self.auroc_by_score,
            "cascade": None if self.cascade is None else self.cascade.to_dict(),
            "per_route": self.per_route,
            "confusion": self.confusion,
            "risk_coverage": [list(p) for p in self.risk_coverage],
            "tradeoff": self.tradeoff,
            "unknown_as_oos": self.unknown_as_oos,
        }

    def summary(self) -> str:
        def shown(name: str, value: float | None) -> str:
            return f"{value:.4f}" if value is not None else f"n/a ({self.undefined.get(name, 'undefined')})"

        threshold = f"{self.threshold:.4f}" if self.threshold is not None else "n/a"
        lines = [
            f"examples            {self.n} ({self.n_in_scope} in scope, {self.n_oos} out of scope)",
            f"in-scope accuracy   {shown('in_scope_accuracy', self.in_scope_accuracy)}",
            f"top-1 accuracy      {shown('top1_accuracy', self.top1_accuracy)}",
            f"sent to default     {shown('default_route_rate', self.default_route_rate)} of in-scope queries",
            f"OOS precision       {shown('oos_precision', self.oos_precision)}",
            f"OOS recall          {shown('oos_recall', self.oos_recall)}",
            f"OOS F1              {shown('oos_f1', self.oos_f1)}",
            f"OOS AUROC / AUPR    {shown('oos_auroc', self.oos_auroc)} / {shown('oos_aupr', self.oos_aupr)}",
            f"threshold           {threshold}{f' ({self.method})' if self.method else ''}",
            f"clarify rate        {self.clarify_rate:.4f}",
            f"latency p50 / p99   {self.latency_ms_p50:.2f} / {self.latency_ms_p99:.2f} ms per query",
        ]
        if self.auroc_by_score:
            ranked = sorted(self.auroc_by_score.items(), key=lambda kv: -kv[1])
            lines.append("OOS AUROC by score  " + ", ".join(f"{name} {value:.4f}" for name, value in ranked))
        if self.cascade is not None:
            lines += self.cascade.summary_lines()
        if self.unknown_as_oos:
            counted = ", ".join(f"{label} {n}" for label, n in sorted(self.unknown_as_oos.items()))
            lines.append(f"unknown labels      scored as out of scope: {counted}")
        worst = sorted(self.per_route.items(), key=lambda kv: kv[1]["recall"])[:5]
        if worst:
            lines.append("lowest recall       " + ", ".join(f"{r} {m['recall']:.2f}" for r, m in worst))
        return "\n".join(lines)


_Array = np.ndarray[Any, Any]


def _f1(p: float | None, r: float | None) -> float | None:
    if p is None or r is None:
        return None
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _separation(confidence: np.ndarray[Any, Any], is_oos: np.ndarray[Any, Any]) -> tuple[float, float]:
    """OOS AUROC and AUPR, scoring out of scope by low confidence (needs both kinds of rows)."""
    with needs("embed"):
        from sklearn.metrics import average_precision_score, roc_auc_score

    oos_score = -confidence
    return float(roc_auc_score(is_oos, oos_score)), float(average_precision_score(is_oos, oos_score))


def evaluate(
    router: SemanticRouter,
    examples: Sequence[LabelledExample],
    *,
    oos_label: str = OOS_LABEL,
    progress: Progress | None = None,
    batch_size: int = 256,
    unknown_labels: UnknownLabels = "refuse",
) -> EvalReport:
    """Route every example one at a time (that is what latency measures) and score the outcomes.

    Raises :class:`~routegate.errors.ConfigurationError` when ``examples`` is empty, or when a label is neither a
    route of ``router`` nor ``oos_label`` and ``unknown_labels`` is ``"refuse"``; with ``"oos"`` such rows are
    scored as out of scope and counted in the report's ``unknown_as_oos``.
    """
    labels, unknown = known_labels(examples, router.routes, oos_label=oos_label, unknown_labels=unknown_labels)
    texts = [e.text for e in examples]
    decisions: list[SemanticDecision] = []
    latencies: list[float] = []
    total = len(texts)
    if total:
        router.route(texts[0])  # load the encoder before timing
    for i, text in enumerate(texts):
        started = time.perf_counter()
        decisions.append(router.route(text))
        latencies.append((time.perf_counter() - started) * 1000)
        if progress is not None and (i + 1) % 50 == 0:
            progress(i + 1, total)
    if progress is not None:
        progress(total, total)
    report = score_decisions(decisions, labels, router.default_route, latencies, oos_label=oos_label)
    return replace(report, unknown_as_oos=unknown, **score_separation(router, texts, labels, oos_label=oos_label))


def score_separation(
    router: SemanticRouter, texts: Sequence[str], labels: Sequence[str], *, oos_label: str = OOS_LABEL
) -> dict[str, Any]:
    """The report's ``auroc_by_score`` (the OOS AUROC of each score ``router`` computes, on ``texts`` labelled
    ``labels``; empty without both in-scope and out-of-scope rows) and ``method`` (the score it decides with)."""
    is_oos = np.array([label == oos_label for label in labels], dtype=bool)
    by_score: dict[str, float] = {}
    if is_oos.any() and not is_oos.all():
        table = router.score_table(list(texts))  # batched: the timed routing is measured apart
        by_score = {name: _separation(values.astype(np.float64), is_oos)[0] for name, values in table.items()}
    return {"auroc_by_score": by_score, "method": router.calibration.method}


def known_labels(
    examples: Sequence[LabelledExample],
    routes: Sequence[str],
    *,
    oos_label: str = OOS_LABEL,
    unknown_labels: UnknownLabels = "refuse",
) -> tuple[list[str], dict[str, int]]:
    """The labels to score (unknown ones mapped to ``oos_label`` when ``unknown_labels="oos"``) and the count of
    rows per unknown label; refuses empty data and, by default, unknown labels."""
    if not examples:
        raise ConfigurationError("no examples to evaluate: the data is empty; give a JSONL file of labelled rows")
    if unknown_labels not in ("refuse", "oos"):
        raise ConfigurationError(f"unknown_labels must be 'refuse' or 'oos', got {unknown_labels!r}")
    known = {*routes, oos_label}
    unknown = dict(sorted(Counter(e.label for e in examples if e.label not in known).items()))
    if unknown and unknown_labels == "refuse":
        listed = ", ".join(f"{label!r} ({n} rows)" for label, n in list(unknown.items())[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        raise ConfigurationError(
            f"{sum(unknown.values())} of {len(examples)} rows have labels the router does not know: {listed}{more}. "
            f"Its routes are {sorted(routes)[:10]}{' …' if len(routes) > 10 else ''} and {oos_label!r} marks out "
            "of scope; fix the labels (or --oos-label), or score them as out of scope (unknown_labels='oos', "
            "routegate eval --unknown-as-oos)"
        )
    return [oos_label if e.label in unknown else e.label for e in examples], unknown


def score_decisions(
    decisions: Sequence[SemanticDecision],
    labels: Sequence[str],
    default_route: str,
    latencies_ms: Sequence[float] = (),
    *,
    oos_label: str = OOS_LABEL,
) -> EvalReport:
    y = np.array(labels, dtype=object)
    is_oos = y == oos_label
    outcome = np.array([d.outcome for d in decisions], dtype=object)
    predicted = np.array([oos_label if d.outcome == "default" else d.route for d in decisions], dtype=object)
    top = np.array([d.top for d in decisions], dtype=object)
    confidence = np.array([d.confidence for d in decisions], dtype=np.float64)
    routed_ok = (outcome == "route") & (predicted == y)
    n_in, n_oos = int((~is_oos).sum()), int(is_oos.sum())
    band = cascade_band(outcome, (routed_ok & ~is_oos) | ((outcome == "default") & is_oos), is_oos)
    undefined: dict[str, str] = {}
    said_oos = outcome == "default"
    acc = top1 = default_rate = oos_p = oos_r = auroc = aupr = None
    if n_in:
        acc = float(routed_ok[~is_oos].sum() / n_in)
        top1 = float(((top == y) & ~is_oos).sum() / n_in)
        default_rate = float((said_oos & ~is_oos).sum() / n_in)
    else:
        for name in ("in_scope_accuracy", "top1_accuracy", "default_route_rate"):
            undefined[name] = "no in-scope rows in the data"
    tp = int((said_oos & is_oos).sum())
    if said_oos.any():
        oos_p = tp / int(said_oos.sum())
    else:
        undefined["oos_precision"] = "no query was sent to the default route"
    if n_oos:
        oos_r = tp / n_oos
    else:
        undefined["oos_recall"] = f"no {oos_label!r} rows in the data"
    if n_in and n_oos:
        auroc, aupr = _separation(confidence, is_oos)
    else:
        reason = f"needs both {oos_label!r} and in-scope rows"
        undefined["oos_auroc"] = undefined["oos_aupr"] = reason
    oos_f1 = _f1(oos_p, oos_r)
    if oos_f1 is None:
        undefined["oos_f1"] = undefined.get("oos_recall") or undefined["oos_precision"]
    lat = np.array(latencies_ms, dtype=np.float64)
    return EvalReport(
        n=len(labels),
        n_in_scope=n_in,
        n_oos=n_oos,
        in_scope_accuracy=acc,
        oos_precision=oos_p,
        oos_recall=oos_r,
        oos_f1=oos_f1,
        clarify_rate=float((outcome == "clarify").mean()) if len(outcome) else 0.0,
        latency_ms_p50=float(np.percentile(lat, 50)) if len(lat) else 0.0,
        latency_ms_p99=float(np.percentile(lat, 99)) if len(lat) else 0.0,
        per_route=_per_route(labels, y, predicted, outcome, oos_label),
        confusion=_confusion(labels, np.where(outcome == "clarify", "clarify", predicted)),
        risk_coverage=_risk_coverage(confidence, is_oos | (top != y)),
        tradeoff=_tradeoff(confidence, (top == y) & ~is_oos, is_oos, n_in, n_oos),
        top1_accuracy=top1,
        default_route_rate=default_rate,
        oos_auroc=auroc,
        oos_aupr=aupr,
        threshold=float(decisions[0].threshold) if decisions else None,
        undefined=undefined,
        cascade=band,
    )


def _per_route(
    labels: Sequence[str], y: _Array, predicted: _Array, outcome: _Array, oos_label: str
) -> dict[str, dict[str, float]]:
    """Each route's precision and recall among the queries it was routed (``outcome == "route"``), and its
    support; the out-of-scope label is not a route."""
    per_route: dict[str, dict[str, float]] = {}
    for route in sorted(set(labels) | {str(p) for p in predicted}):
        if route == oos_label:
            continue
        pred_r = (predicted == route) & (outcome == "route")
        true_r = y == route
        hit = int((pred_r & true_r).sum())
        per_route[route] = {
            "precision": hit / int(pred_r.sum()) if pred_r.any() else 0.0,
            "recall": hit / int(true_r.sum()) if true_r.any() else 0.0,
            "support": float(true_r.sum()),
        }
    return per_route


def _confusion(labels: Sequence[str], shown: _Array) -> dict[str, dict[str, int]]:
    """How often each label was answered with each route (``clarify`` when the router asked back)."""
    confusion: dict[str, dict[str, int]] = {}
    for (label, pred), count in Counter(zip(labels, (str(s) for s in shown), strict=True)).items():
        confusion.setdefault(label, {})[pred] = count
    return confusion


def _risk_coverage(confidence: _Array, wrong: _Array) -> list[tuple[float, float]]:
    """The risk–coverage curve over all queries (50 points): accept the most confident first; an accepted query is
    ``wrong`` when it is out of scope or its top route is not its label."""
    order = np.argsort(-confidence, kind="stable")
    n = len(order)
    if not n:
        return []
    cum_wrong = np.cumsum(wrong[order])
    ks = sorted({max(1, int(np.rint(n * c))) for c in np.linspace(0.02, 1.0, 50)})
    return [(round(k / n, 4), round(float(cum_wrong[k - 1] / k), 5)) for k in ks]


def _tradeoff(confidence: _Array, top_ok: _Array, is_oos: _Array, n_in: int, n_oos: int) -> list[dict[str, float]]:
    """In-scope accuracy against OOS recall as the confidence threshold rises (61 thresholds); empty without both
    kinds of rows."""
    if not (n_in and n_oos):
        return []
    tradeoff: list[dict[str, float]] = []
    for t in np.quantile(confidence, np.linspace(0.0, 0.6, 61)):
        accepted = confidence >= t
        tradeoff.append(
            {
                "threshold": round(float(t), 5),
                "in_scope_accuracy": round(float((accepted & top_ok).sum() / n_in), 5),
                "oos_recall": round(float((~accepted & is_oos).sum() / n_oos), 5),
            }
        )
    return tradeoff


def plot_report(report: EvalReport, path: str | Path, *, title: str = "routegate router") -> Path:
    """Risk–coverage curve and OOS trade-off curve as a PNG (needs the ``plot`` extra: matplotlib)."""
    with needs("plot"):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    if report.risk_coverage:
        cov, risk = zip(*report.risk_coverage, strict=True)
        ax1.plot(cov, risk, marker=".")
    ax1.set_xlabel("coverage (share of queries routed)")
    ax1.set_ylabel("risk (share wrong among routed)")
    ax1.set_title("risk–coverage")
    ax1.grid(alpha=0.3)
    if report.tradeoff:
        ax2.plot([p["oos_recall"] for p in report.tradeoff], [p["in_scope_accuracy"] for p in report.tradeoff])
        if report.oos_recall is not None and report.in_scope_accuracy is not None:
            ax2.scatter([report.oos_recall], [report.in_scope_accuracy], color="red", zorder=3, label="calibrated")
            ax2.legend()
    ax2.set_xlabel("out-of-scope recall")
    ax2.set_ylabel("in-scope accuracy")
    ax2.set_title("OOS trade-off")
    ax2.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    out = Path(path)
    try:
        fig.savefig(out, dpi=100)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write the plot to {out}: {exc.strerror or exc}; give a path in an existing, writable directory"
        ) from exc
    finally:
        plt.close(fig)
    return out
