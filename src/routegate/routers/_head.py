"""The learned head of the semantic router: what turns an embedding (and the text) into route scores.

Three parts, all plain arrays (saved as ``.npy``, loaded without pickle):

* a multinomial logistic regression over the sentence embedding;
* optionally a logistic regression over character n-gram TF-IDF of the text, averaged with the first
  (weight ``1 - alpha``) — it catches spellings and rare words the embedding blurs;
* the route's example bank: the mean similarity of the query to its ``k`` nearest examples *of the predicted
  route* (a distance-to-training-data signal; out-of-scope queries are far from every route's examples);
* the routes as Gaussians with a shared covariance (:mod:`routegate.routers._gauss`): the Mahalanobis distance to
  the nearest route's mean, a class-conditional score on the features themselves.

Scores that say how much a query is in scope (higher = more): ``p_top + beta * knn`` (the default), ``mahalanobis``,
``relative_mahalanobis``, ``energy`` (the log-sum-exp of the embedding model's logits, Liu et al. 2020), and the out-of-scope detector over
all of them; calibration chooses one on held-out data by :mod:`routegate.routers.calibration`'s objective, together
with ``alpha`` and ``beta``. ``margin = p(top) - p(runner-up)`` decides clarify.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from routegate._extras import needs

with needs("embed"):
    import numpy as np

from routegate.routers._charngrams import CharNgrams
from routegate.routers._gauss import F32 as F32  # the array types live in the lowest module; re-exported here
from routegate.routers._gauss import I64 as I64
from routegate.routers._gauss import Gaussian


@dataclass(frozen=True, slots=True)
class CharHead:
    ngrams: CharNgrams
    coef: F32  # (routes, vocabulary)
    intercept: F32  # (routes,)


@dataclass(frozen=True, slots=True)
class Head:
    routes: tuple[str, ...]
    coef: F32  # (routes, dim)
    intercept: F32  # (routes,)
    bank: F32  # (examples, dim), grouped by route
    offsets: I64  # (routes + 1,): route r's examples are bank[offsets[r]:offsets[r + 1]]
    char: CharHead | None = None
    alpha: float = 1.0
    beta: float = 0.0
    knn_k: int = 5
    gauss: Gaussian | None = None  # None: a router saved before the class-conditional scores

    def with_mix(self, alpha: float, beta: float) -> Head:
        char = self.char if alpha < 1.0 else None
        return replace(self, char=char, alpha=alpha, beta=beta)


def softmax(logits: F32) -> F32:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    out: F32 = (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def embed_logits(head: Head, vectors: F32) -> F32:
    out: F32 = vectors @ head.coef.T + head.intercept
    return out


def embed_probs(head: Head, vectors: F32) -> F32:
    if len(head.routes) == 1:
        return np.ones((len(vectors), 1), dtype=np.float32)
    return softmax(embed_logits(head, vectors))


def energy(head: Head, vectors: F32) -> F32:
    """Minus the free energy of the embedding model's logits, ``log sum_r exp(logit_r)`` (higher = more in scope)."""
    logits = embed_logits(head, vectors)
    top = logits.max(axis=1)
    out: F32 = (top + np.log(np.exp(logits - top[:, None]).sum(axis=1))).astype(np.float32)
    return out


def mahalanobis(head: Head, vectors: F32) -> tuple[F32, F32] | None:
    """Minus the squared Mahalanobis distance to the nearest route, and the same relative to the background
    Gaussian (:mod:`routegate.routers._gauss`); ``None`` for a head without the Gaussians."""
    if head.gauss is None:
        return None
    nearest = head.gauss.distances(vectors).min(axis=1)
    return -nearest, head.gauss.background_distance(vectors) - nearest


def char_probs(head: Head, texts: Sequence[str]) -> F32 | None:
    if head.char is None or len(head.routes) == 1:
        return None
    return softmax(head.char.ngrams.logits(texts, head.char.coef, head.char.intercept))


def fuse(head: Head, p_embed: F32, p_char: F32 | None, alpha: float) -> F32:
    if p_char is None or alpha >= 1.0:
        return p_embed
    fused: F32 = (alpha * p_embed + (1.0 - alpha) * p_char).astype(np.float32)
    return fused


def knn_stats(head: Head, vectors: F32, route_index: I64) -> tuple[F32, F32]:
    """Per vector: the mean cosine similarity to its ``k`` nearest examples of route ``route_index[i]``, and the
    similarity to the nearest one."""
    mean = np.zeros(len(vectors), dtype=np.float32)
    best = np.zeros(len(vectors), dtype=np.float32)
    for i, r in enumerate(route_index):
        lo, hi = int(head.offsets[r]), int(head.offsets[r + 1])
        if hi <= lo:
            continue
        sims = head.bank[lo:hi] @ vectors[i]
        k = min(head.knn_k, len(sims))
        nearest = np.partition(sims, len(sims) - k)[-k:]
        mean[i] = float(nearest.mean())
        best[i] = float(nearest.max())
    return mean, best


def knn_to(head: Head, vectors: F32, route_index: I64) -> F32:
    """Mean cosine similarity of each vector to its ``k`` nearest examples of route ``route_index[i]``."""
    return knn_stats(head, vectors, route_index)[0]


DETECTOR_FEATURES = (
    "p_top",
    "margin",
    "knn_mean",
    "knn_max",
    "entropy",
    "p_embed_max",
    "p_char_max",
    "models_agree",
    "p_embed_top",
    "p_char_top",
)
"""The out-of-scope detector's inputs in a router saved before the class-conditional scores."""
FEATURE_SCORES = ("mahalanobis", "relative_mahalanobis", "energy")
"""Scores on the encoder's features: each a confidence of its own and an input of the detector."""
DETECTOR_INPUTS = DETECTOR_FEATURES + FEATURE_SCORES


def detector_features(
    probs: F32,
    p_embed: F32,
    p_char: F32 | None,
    top: I64,
    p2: F32,
    knn_mean: F32,
    knn_max: F32,
    feature_scores: dict[str, F32] | None = None,
    inputs: tuple[str, ...] = DETECTOR_FEATURES,
) -> F32:
    """The out-of-scope detector's ``inputs`` (names from ``DETECTOR_INPUTS``) as columns; ``p_char`` ``None`` =
    embedding model only; ``feature_scores``: the ``FEATURE_SCORES`` of each row, when ``inputs`` name them."""
    idx = np.arange(len(probs))
    pc = p_embed if p_char is None else p_char
    p1 = probs[idx, top]
    columns = {
        "p_top": p1,
        "margin": p1 - p2,
        "knn_mean": knn_mean,
        "knn_max": knn_max,
        "entropy": -(probs * np.log(np.clip(probs, 1e-12, None))).sum(axis=1),
        "p_embed_max": p_embed.max(axis=1),
        "p_char_max": pc.max(axis=1),
        "models_agree": (p_embed.argmax(axis=1) == pc.argmax(axis=1)).astype(np.float32),
        "p_embed_top": p_embed[idx, top],
        "p_char_top": pc[idx, top],
        **(feature_scores or {}),
    }
    out: F32 = np.column_stack([columns[name] for name in inputs]).astype(np.float32)
    return out


def train_head(
    vectors: F32,
    texts: Sequence[str],
    labels: Sequence[str],
    *,
    c_embed: float,
    c_char: float,
    char_ngrams: bool,
    knn_k: int,
    max_char_features: int,
    seed: int = 0,
) -> Head:
    """Fit the head on in-scope examples (``labels`` are route names; no out-of-scope rows here)."""
    with needs("embed"):
        from sklearn.linear_model import LogisticRegression

    routes = tuple(sorted(set(labels)))
    index = {r: i for i, r in enumerate(routes)}
    y = np.fromiter((index[label] for label in labels), dtype=np.int64, count=len(labels))
    order = np.argsort(y, kind="stable")
    bank = np.ascontiguousarray(vectors[order], dtype=np.float32)
    offsets = np.searchsorted(y[order], np.arange(len(routes) + 1)).astype(np.int64)
    dim = vectors.shape[1]
    gauss = Gaussian.fit(vectors, y, len(routes))
    if len(routes) == 1:
        coef = np.zeros((1, dim), dtype=np.float32)
        intercept = np.zeros(1, dtype=np.float32)
        return Head(routes, coef, intercept, bank, offsets, knn_k=knn_k, gauss=gauss)
    model = LogisticRegression(C=c_embed, max_iter=2000, random_state=seed).fit(vectors, y)
    coef, intercept = _multinomial(model, len(routes))
    char: CharHead | None = None
    if char_ngrams:
        ngrams, matrix = CharNgrams.fit(texts, max_features=max_char_features)
        char_model = LogisticRegression(C=c_char, max_iter=1000, random_state=seed).fit(matrix, y)
        char_coef, char_intercept = _multinomial(char_model, len(routes))
        char = CharHead(ngrams, char_coef, char_intercept)
    return Head(routes, coef, intercept, bank, offsets, char, knn_k=knn_k, gauss=gauss)


def _multinomial(model: object, n_routes: int) -> tuple[F32, F32]:
    """Coefficients as (routes, features) softmax weights (sklearn stores one row for two classes)."""
    coef = np.asarray(model.coef_, dtype=np.float32)  # type: ignore[attr-defined]  # fitted sklearn model
    intercept = np.asarray(model.intercept_, dtype=np.float32)  # type: ignore[attr-defined]  # fitted sklearn model
    if n_routes == 2 and coef.shape[0] == 1:
        # binary LR: p(1) = sigmoid(w.x + b) = softmax([-w/2, w/2]) over the two classes
        coef = np.vstack([-coef / 2, coef / 2]).astype(np.float32)
        intercept = np.array([-intercept[0] / 2, intercept[0] / 2], dtype=np.float32)
    return coef, intercept
