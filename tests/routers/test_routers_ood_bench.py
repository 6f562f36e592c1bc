"""bench/ood_scores.py stays runnable: on a small CLINC150 subset with the real encoder it measures every candidate
score beside the router's own choice, writes its embeddings cache once and reuses it, and its Banking77 mode reports
each score's AUROC per split. No figure is asserted here (the figures live in docs/benchmarks/routers.md)."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
DATA = Path(__file__).resolve().parents[1] / "data"


def load_bench(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCH))  # the bench imports its neighbours (clinc150, banking77)
    spec = importlib.util.spec_from_file_location("ood_scores_bench", BENCH / "ood_scores.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def clinc(tmp_path: Path) -> Path:
    folder = tmp_path / "clinc150"
    folder.mkdir()
    for split in ("train", "val", "test"):
        (folder / f"{split}.jsonl").write_text((DATA / f"clinc150_subset_{split}.jsonl").read_text())
    return folder


def test_every_candidate_is_measured_beside_the_routers_choice_and_the_cache_is_reused(
    clinc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench(monkeypatch)
    cache, first, second = tmp_path / "vectors.npz", tmp_path / "first.json", tmp_path / "second.json"
    timed = ["--latency-queries", "5"]
    assert bench.main(["--data", str(clinc), "--cache", str(cache), "--json", str(first), *timed]) == 0
    assert cache.exists()
    assert "embedded" in capsys.readouterr().err
    figures = json.loads(first.read_text())
    per_query = figures.pop("per_query")  # a timing: the one figure a second run may not repeat
    assert per_query["queries"] == 5 and per_query["p50_ms"] > 0
    names = [row["name"] for row in figures["scores"]]
    assert names[0].startswith("the router's choice (")
    for expected in ("kNN over all examples, k=5", "ViM, D=64", "Mahalanobis, shrinkage 0.6", "energy, T=0.5"):
        assert expected in names and f"OOS detector + {expected}" in names
    assert any(name.startswith("mean of standardised ") for name in names)
    for row in figures["scores"]:
        for key in ("val_auroc", "test_auroc", "val_in_scope", "test_in_scope", "test_oos_recall"):
            assert 0.0 <= row[key] <= 1.0, (row["name"], key)
    assert set(figures["diagnostics"]) >= {"oracle_test_in_scope_at_85", "confident_floor_test_oos_recall"}

    assert bench.main(["--data", str(clinc), "--cache", str(cache), "--json", str(second), *timed]) == 0
    assert "embedded" not in capsys.readouterr().err  # every text came from the cache
    again = json.loads(second.read_text())
    assert again.pop("per_query")["queries"] == 5
    assert again == figures


def test_the_banking77_mode_reports_each_scores_auroc_per_split(
    clinc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_bench(monkeypatch)
    banking = tmp_path / "banking77"
    banking.mkdir()
    # 12 intents: the splits hold 10 out
    topics = ["card", "loan", "pin", "transfer", "refund", "cash", "fee", "rate", "account", "phone", "limit", "app"]
    rows = [(f"a question about my {topic} number {i}", f"{topic}_intent") for topic in topics for i in range(10)]
    for name in ("train.csv", "test.csv"):
        with (banking / name).open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["text", "category"])
            writer.writerows(rows)
    out = tmp_path / "figures.json"
    args = ["--data", str(clinc), "--cache", str(tmp_path / "v.npz"), "--banking77", str(banking), "--json", str(out)]
    assert bench.main(args) == 0
    by_score = json.loads(out.read_text())["banking77"]
    assert any(name.startswith("the router's choice (") for name in by_score)
    assert "p_top + 3 knn_mean" in by_score and "kNN over all examples, k=1" in by_score
    for name, values in by_score.items():
        assert len(values) == 5 and all(math.isfinite(v) and 0.0 <= v <= 1.0 for v in values), name
    assert "Banking77, 10 held-out intents" in capsys.readouterr().out


def test_a_folder_that_is_not_a_sentence_transformers_model_is_refused_before_anything_is_embedded(
    clinc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench(monkeypatch)
    cache, folder = tmp_path / "vectors.npz", tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(SystemExit, match=r"not-a-model: not a sentence-transformers model folder \(no modules.json\)"):
        bench.main(["--data", str(clinc), "--cache", str(cache), "--sentence-transformer", str(folder)])
    assert not cache.exists()
    with pytest.raises(SystemExit):  # argparse: one encoder at a time
        bench.main(
            ["--data", str(clinc), "--cache", str(cache), "--encoder", "e5", "--sentence-transformer", str(folder)]
        )
