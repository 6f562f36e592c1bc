"""Class-conditional feature scores: the Mahalanobis distance with a shared covariance and the energy score, fitted
with the head, chosen on calibration data only, saved with the router and refused when their files were changed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from sklearn.covariance import LedoitWolf

from routegate.embed import HashingEncoder
from routegate.errors import ConfigurationError
from routegate.routers import FitConfig, LabelledExample, SemanticRouter
from routegate.routers._gauss import Gaussian
from routegate.routers.data import load_examples
from routegate.routers.evaluation import score_decisions
from routegate.routers.semantic import SemanticDecision

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clinc150"


class TableEncoder:
    """Vectors looked up by text (the test's own geometry, nothing learned)."""

    model_id = "test-table"

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors
        self.dim = len(next(iter(vectors.values())))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts]).astype(np.float32)


def test_gaussian_distances_are_the_mahalanobis_distances_under_the_ledoit_wolf_covariances() -> None:
    rng = np.random.default_rng(0)
    means = rng.normal(size=(3, 6))
    y = np.repeat(np.arange(3), 40)
    x = (means[y] + rng.normal(size=(120, 6)) * np.array([3.0, 1.0, 0.5, 0.2, 0.1, 0.05])).astype(np.float32)
    gauss = Gaussian.fit(x, y.astype(np.int64), 3)
    mu = np.stack([x[y == c].mean(axis=0) for c in range(3)])
    precision = np.linalg.inv(LedoitWolf(assume_centered=True).fit(x - mu[y]).covariance_)
    queries = rng.normal(size=(5, 6)).astype(np.float32)
    expected = np.array([[(q - m) @ precision @ (q - m) for m in mu] for q in queries])
    np.testing.assert_allclose(gauss.distances(queries), expected, rtol=1e-3, atol=1e-3)
    center = x.mean(axis=0)
    background = np.linalg.inv(LedoitWolf(assume_centered=True).fit(x - center).covariance_)
    expected_background = np.array([(q - center) @ background @ (q - center) for q in queries])
    np.testing.assert_allclose(gauss.background_distance(queries), expected_background, rtol=1e-3, atol=1e-3)


def _anisotropic_data() -> tuple[TableEncoder, list[LabelledExample], list[LabelledExample]]:
    """Two routes that vary along dimension 1 only; out-of-scope queries sit on a route's axis but off it along
    dimension 2, where no training example ever varies: confident for the classifier and close to the examples by
    cosine, far by Mahalanobis."""
    rng = np.random.default_rng(1)
    vectors: dict[str, np.ndarray] = {}
    train: list[LabelledExample] = []
    val: list[LabelledExample] = []

    def add(text: str, vector: np.ndarray, label: str, into: list[LabelledExample]) -> None:
        vectors[text] = vector
        into.append(LabelledExample(text, label))

    for i in range(160):
        side = 1.0 if i % 2 else -1.0
        noise = rng.normal(size=8) * 0.01
        vector = np.array([5.0 * side, rng.normal() * 2.0, 0, 0, 0, 0, 0, 0]) + noise
        add(f"q{i}", vector, "A" if side > 0 else "B", train if i < 120 else val)
    for i in range(40):
        side = 1.0 if i % 2 else -1.0
        vector = np.array([5.0 * side, rng.normal() * 2.0, rng.choice([-1.0, 1.0]) * 0.6, 0, 0, 0, 0, 0])
        add(f"oos{i}", vector + rng.normal(size=8) * 0.01, "oos", val)
    return TableEncoder(vectors), train, val


def test_calibration_chooses_mahalanobis_where_only_it_separates_out_of_scope_queries() -> None:
    encoder, train, val = _anisotropic_data()
    config = FitConfig(char_ngrams=False, oos_detector=False)
    router = SemanticRouter.fit(train, val=val, encoder=encoder, config=config)  # type: ignore[arg-type]
    assert router.calibration.method == "mahalanobis"
    assert router.calibration.in_scope_accuracy == 1.0 and (router.calibration.oos_recall or 0) >= 0.85
    table = router.score_table([e.text for e in val])
    is_oos = np.array([e.label == "oos" for e in val])
    assert table["mahalanobis"][is_oos].max() < table["mahalanobis"][~is_oos].min()  # separated completely
    assert router.route("q121").route == "A"
    # without the score to choose, the same data is calibrated on p_top + beta * knn, which cannot separate them
    plain = SemanticRouter.fit(
        train,
        val=val,
        encoder=encoder,
        config=FitConfig(char_ngrams=False, oos_detector=False, scores=("p_top+beta*knn",)),  # type: ignore[arg-type]
    )
    assert plain.calibration.method == "p_top+beta*knn" and (plain.calibration.in_scope_accuracy or 0) < 0.9


def test_without_out_of_scope_rows_the_feature_scores_are_not_chosen_by_coverage() -> None:
    encoder, train, val = _anisotropic_data()
    in_scope_val = [e for e in val if e.label != "oos"]
    router = SemanticRouter.fit(train, val=in_scope_val, encoder=encoder, config=FitConfig(char_ngrams=False))  # type: ignore[arg-type]
    assert router.calibration.objective == "inscope_coverage" and router.calibration.method == "p_top+beta*knn"
    assert {g["score"] for g in router.calibration.grid} == {"p_top+beta*knn"}


def test_a_config_naming_an_unknown_score_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="scores must include 'p_top\\+beta\\*knn'"):
        FitConfig(scores=("mahalanobis",))
    with pytest.raises(ConfigurationError, match="name only"):
        FitConfig(scores=("p_top+beta*knn", "cosine"))


@pytest.fixture(scope="module")
def fitted() -> SemanticRouter:
    train, val = load_examples(EXAMPLES / "train.jsonl"), load_examples(EXAMPLES / "val.jsonl")
    return SemanticRouter.fit(train, val=val, encoder=HashingEncoder(dim=384))


def test_a_saved_router_gives_the_same_scores_and_decisions_after_loading(
    fitted: SemanticRouter, tmp_path: Path
) -> None:
    texts = [e.text for e in load_examples(EXAMPLES / "test.jsonl")]
    loaded = SemanticRouter.load(fitted.save(tmp_path / "router"), encoder=HashingEncoder(dim=384))
    before, after = fitted.score_table(texts), loaded.score_table(texts)
    assert set(before) == {"p_top", "knn", "mahalanobis", "relative_mahalanobis", "energy", "confidence"}
    for name in before:
        np.testing.assert_array_equal(before[name], after[name], err_msg=name)
    assert loaded.calibration == fitted.calibration
    assert [d.to_dict() for d in loaded.route_many(texts)] == [d.to_dict() for d in fitted.route_many(texts)]


@pytest.mark.parametrize("name", ["gauss_whiten", "gauss_centers", "coef", "bank"])
def test_an_array_changed_after_saving_is_refused_by_its_hash(
    fitted: SemanticRouter, tmp_path: Path, name: str
) -> None:
    path = fitted.save(tmp_path / "router")
    array = np.load(path / f"{name}.npy")
    array.flat[0] += 1.0  # a valid array of the same shape and dtype: only the recorded hash can tell
    np.save(path / f"{name}.npy", array)
    with pytest.raises(
        ConfigurationError, match=rf"{name}\.npy \(array '{name}'\): its SHA-256 differs .* changed or corrupted"
    ):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=384))


def test_a_version_2_manifest_without_an_array_hash_is_refused(fitted: SemanticRouter, tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "router")
    manifest = json.loads((path / "manifest.json").read_text())
    del manifest["arrays"]["gauss_whiten"]["sha256"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match="array 'gauss_whiten' has no sha256 entry"):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=384))


def test_a_router_saved_in_format_1_still_loads_without_the_mahalanobis_score(tmp_path: Path) -> None:
    train, val = load_examples(EXAMPLES / "train.jsonl"), load_examples(EXAMPLES / "val.jsonl")
    config = FitConfig(oos_detector=False, scores=("p_top+beta*knn",))
    router = SemanticRouter.fit(train, val=val, encoder=HashingEncoder(dim=384), config=config)
    path = router.save(tmp_path / "router")
    manifest = json.loads((path / "manifest.json").read_text())  # as format 1 wrote it: no Gaussians, no hashes
    manifest["version"] = 1
    for name in ("gauss_whiten", "gauss_centers", "gauss_background_whiten", "gauss_background_center"):
        del manifest["arrays"][name]
        (path / f"{name}.npy").unlink()
    for spec in manifest["arrays"].values():
        del spec["sha256"]
    for key in ("score", "detector_inputs"):
        del manifest["calibration"][key]
    (path / "manifest.json").write_text(json.dumps(manifest))
    loaded = SemanticRouter.load(path, encoder=HashingEncoder(dim=384))
    texts = [e.text for e in load_examples(EXAMPLES / "test.jsonl")]
    assert loaded.head.gauss is None and not {"mahalanobis", "relative_mahalanobis"} & set(loaded.score_table(texts))
    assert [d.route for d in loaded.route_many(texts)] == [d.route for d in router.route_many(texts)]


def test_a_manifest_of_a_newer_format_is_refused_saying_what_to_do(fitted: SemanticRouter, tmp_path: Path) -> None:
    path = fitted.save(tmp_path / "router")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["version"] = 3
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match="version 3, this routegate reads versions 1, 2; upgrade routegate"):
        SemanticRouter.load(path, encoder=HashingEncoder(dim=384))


def _decision(outcome: str, top: str) -> SemanticDecision:
    return SemanticDecision(
        route="fallback" if outcome == "default" else top,
        outcome=outcome,  # type: ignore[arg-type]  # a literal of the three outcomes
        top=top,
        score=0.5,
        confidence=0.5,
        margin=0.1,
        runner_up="b",
        runner_up_score=0.1,
        threshold=0.4,
        clarify_margin=0.05,
    )


def test_the_cascade_band_counts_what_would_go_to_the_llm_and_the_oracle_ceiling() -> None:
    decisions = [
        _decision("route", "a"),  # a: right
        _decision("route", "b"),  # a: wrong, outside the band: an LLM stage never sees it
        _decision("clarify", "a"),  # a: in the band
        _decision("default", "b"),  # b: in scope, sent to the default route: in the band
        _decision("default", "a"),  # oos caught: right on its own, in the band
        _decision("route", "a"),  # oos missed
    ]
    band = score_decisions(decisions, ["a", "a", "a", "b", "oos", "oos"], "fallback").cascade
    assert band is not None
    assert (band.queries, band.in_scope, band.out_of_scope) == (3, 2, 1)
    assert band.share == pytest.approx(3 / 6)
    assert band.accuracy == pytest.approx(2 / 6)  # the first a, the caught oos
    assert band.oracle_accuracy == pytest.approx(4 / 6)  # + the clarify and the in-scope default


def test_fit_scores_option_names_the_routers_scores_and_refuses_others(tmp_path: Path) -> None:
    from routegate.cli import main
    from routegate.cli.routers import SCORE_NAMES, score_names
    from routegate.routers._rule import SCORES

    assert SCORE_NAMES == SCORES  # --help lists them without importing numpy: the two lists must not drift
    assert score_names("energy, mahalanobis") == ("p_top+beta*knn", "energy", "mahalanobis")
    train = EXAMPLES / "train.jsonl"
    assert main(["fit", "--train", str(train), "-o", str(tmp_path / "r"), "--scores", "cosine"]) == 2
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("fit", ["--scores", "mahalanobis (distance to the nearest route's mean", "`routegate eval` reports each"]),
        ("eval", ["the OOS AUROC of each score the router computes", "the cascade's LLM band", "with an oracle"]),
    ],
)
def test_the_help_explains_the_choice_of_score(
    command: str, says: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from routegate.cli import main

    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for phrase in says:
        assert phrase in text, phrase


def test_two_detectors_compete_one_over_the_head_and_one_with_the_feature_scores() -> None:
    encoder, train, val = _anisotropic_data()
    router = SemanticRouter.fit(train, val=val, encoder=encoder, config=FitConfig(char_ngrams=False))  # type: ignore[arg-type]
    rows = {str(g["score"]): g for g in router.calibration.grid}
    assert {"oos-detector", "oos-detector+features", "mahalanobis", "energy"} <= set(rows)
    # only the feature scores see the out-of-scope queries here: whatever wins reads them
    assert router.calibration.method in {"mahalanobis", "relative_mahalanobis", "oos-detector"}
    assert router.calibration.needs_feature_scores()
    assert router.calibration.in_scope_accuracy == 1.0
