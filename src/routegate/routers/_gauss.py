"""Class-conditional Gaussian scores on the encoder's features: the Mahalanobis distance to the nearest route.

Each route is a Gaussian around the mean of its training vectors, all routes sharing one covariance (tied, as in
linear discriminant analysis), estimated from the training vectors minus their route's mean and shrunk towards a
scaled identity by Ledoit and Wolf's formula (``sklearn.covariance.LedoitWolf``: no parameter to choose, and a
well-conditioned estimate with 384 dimensions and a few thousand examples). A query far from every route's mean in
that metric is out of scope: ``mahalanobis = -min_r (x - mu_r)^T Sigma^-1 (x - mu_r)`` (Lee et al. 2018; Podolskiy
et al. 2021 for intent detection with transformer encoders).

The *relative* score subtracts the distance under one background Gaussian fitted to all training vectors
(``relative_mahalanobis = -(min_r d_r(x) - d_0(x))``, Ren et al. 2021): directions in which every sentence varies a
lot count less, which helps most when unseen intents resemble the known ones.

Stored whitened: ``whiten`` is a factor ``W`` with ``W W^T = Sigma^-1`` and ``centers = mu W`` (likewise for the
background), so a query costs two ``dim x dim`` products and a distance to each center.
"""

from __future__ import annotations

from dataclasses import dataclass

from routegate._extras import needs

with needs("embed"):
    import numpy as np
    import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def _whitening(residuals: F64) -> F64:
    """``W`` with ``W W^T`` the inverse of the shrunk covariance of ``residuals`` (rows already centred)."""
    with needs("embed"):
        from sklearn.covariance import LedoitWolf

    dim = residuals.shape[1]
    if np.abs(residuals).max(initial=0.0) > 0:
        covariance = LedoitWolf(assume_centered=True).fit(residuals).covariance_
    else:  # one example per route (or identical ones): nothing to estimate a spread from
        covariance = np.eye(dim)
    if not np.isfinite(covariance).all():
        covariance = np.eye(dim)
    # a floor on the diagonal keeps it positive definite when the residuals span fewer dimensions than there are
    covariance.flat[:: dim + 1] += max(1e-6, 1e-6 * float(np.trace(covariance)) / dim)
    # W = L^-T with Sigma = L L^T, so W W^T = (L L^T)^-1 = Sigma^-1
    out: F64 = np.linalg.inv(np.linalg.cholesky(covariance)).T
    return out


@dataclass(frozen=True, slots=True)
class Gaussian:
    """Route means and a shared covariance, whitened: ``whiten`` (dim, dim), ``centers`` (routes, dim); and the
    background Gaussian of all training vectors: ``background_whiten`` (dim, dim), ``background_center`` (dim,)."""

    whiten: F32
    centers: F32
    background_whiten: F32
    background_center: F32

    @classmethod
    def fit(cls, vectors: F32, route_index: I64, n_routes: int) -> Gaussian:
        """Fit on in-scope training vectors; ``route_index[i]`` is the route of ``vectors[i]`` (every route has
        at least one vector)."""
        x = np.asarray(vectors, dtype=np.float64)
        counts = np.bincount(route_index, minlength=n_routes).astype(np.float64)
        sums = np.zeros((n_routes, x.shape[1]), dtype=np.float64)
        np.add.at(sums, route_index, x)
        means = sums / np.maximum(counts, 1.0)[:, None]
        whiten = _whitening(x - means[route_index])
        mean = x.mean(axis=0)
        background = _whitening(x - mean)
        return cls(
            whiten.astype(np.float32),
            (means @ whiten).astype(np.float32),
            background.astype(np.float32),
            (mean @ background).astype(np.float32),
        )

    def distances(self, vectors: F32) -> F32:
        """Squared Mahalanobis distance of each vector to each route's mean, (n, routes)."""
        z = vectors @ self.whiten
        d = (z * z).sum(axis=1)[:, None] - 2.0 * (z @ self.centers.T) + (self.centers * self.centers).sum(axis=1)
        out: F32 = np.maximum(d, 0.0).astype(np.float32)
        return out

    def background_distance(self, vectors: F32) -> F32:
        """Squared Mahalanobis distance of each vector to the mean of all training vectors, (n,)."""
        z = vectors @ self.background_whiten - self.background_center
        out: F32 = (z * z).sum(axis=1).astype(np.float32)
        return out
