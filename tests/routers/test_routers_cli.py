"""``routegate fit`` / ``routegate eval`` end to end on a small fixed CLINC150 subset with the real encoder.

Checks the pipeline and the report's shape, not the benchmark figure (that is ``bench/clinc150.py``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from routegate.cli import main
from routegate.embed import MiniLMEncoder
from routegate.routers import SemanticRouter, evaluate, load_examples

DATA = Path(__file__).resolve().parents[1] / "data"
TRAIN, VAL, TEST = (DATA / f"clinc150_subset_{s}.jsonl" for s in ("train", "val", "test"))


@pytest.fixture(scope="module")
def router_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("router") / "clinc"
    assert main(["fit", "--train", str(TRAIN), "--val", str(VAL), "-o", str(out), "--clarify-cost", "0.5"]) == 0
    return out


def test_fit_writes_a_loadable_router(router_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((router_dir / "manifest.json").read_text())
    assert manifest["format"] == "routegate.semantic_router"
    assert len(manifest["routes"]) == 8
    assert manifest["calibration"]["source"] == "val"
    assert manifest["calibration"]["objective"] == "oos_recall_floor"
    assert not list(router_dir.glob("*.pkl"))
    encoder = MiniLMEncoder()
    started = time.perf_counter()
    router = SemanticRouter.load(router_dir, encoder=encoder)
    assert time.perf_counter() - started < 5  # generous: loading reads a few small arrays, no model
    assert router.route("what is the weather like in boston").route == "weather"


def test_eval_json_has_the_contract_keys(router_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert main(["eval", str(TEST), "--router", str(router_dir), "--json"]) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    for key in ("in_scope_accuracy", "oos_recall", "oos_precision", "latency_ms_p50", "latency_ms_p99"):
        assert isinstance(report[key], float)
    assert report["n"] == 89
    assert report["in_scope_accuracy"] > 0.7  # sanity, not the benchmark
    assert report["oos_recall"] > 0.4
    assert set(report["per_route"]) >= {"weather", "translate"}
    assert report["risk_coverage"]
    assert "eval [" in captured.err  # the progress bar goes to stderr


def test_eval_text_and_plot(router_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "curve.png"
    assert main(["eval", str(TEST), "--router", str(router_dir), "--plot", str(png), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "in-scope accuracy" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_library_evaluate_matches_cli_counts(router_dir: Path) -> None:
    report = evaluate(SemanticRouter.load(router_dir), load_examples(TEST))
    assert report.n_in_scope == 64
    assert report.n_oos == 25


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["fit", "--train", "/nonexistent.jsonl", "-o", "x"], "cannot read examples"),
        (["eval", str(TEST), "--router", "/nonexistent-router"], "no saved router"),
    ],
)
def test_bad_paths_give_clear_errors(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_malformed_jsonl_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "hi", "label": "a"}\n{"text": 3}\n')
    assert main(["fit", "--train", str(bad), "-o", str(tmp_path / "r")]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_fit_adds_labelled_misroutes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from routegate.routers import Misroute, MisrouteLog

    log = MisrouteLog(tmp_path / "misroutes.jsonl")
    log.record([Misroute("how cold is it outside", "timer", "weather"), Misroute("hmm", "timer", None)])
    out = tmp_path / "r"
    assert main(["fit", "--train", str(TRAIN), "--misroutes", str(log.path), "-o", str(out), "--no-char-ngrams"]) == 0
    assert "adding 1 labelled misroute(s)" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["arrays"]["bank"]["shape"][0] == 8 * 25 + 1  # the subset's examples + the labelled misroute
    assert "char_coef" not in manifest["arrays"]
    assert SemanticRouter.load(out).route("how cold is it outside").top == "weather"
