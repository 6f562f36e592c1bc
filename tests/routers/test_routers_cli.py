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
from routegate.routers import SemanticRouter, evaluate
from routegate.routers.data import load_examples

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
    # each score's AUROC, so a user sees which one the data favours; the one the router decides with among them
    assert set(report["auroc_by_score"]) == {
        "p_top",
        "knn",
        "mahalanobis",
        "relative_mahalanobis",
        "energy",
        "confidence",
    }
    assert all(0.0 <= v <= 1.0 for v in report["auroc_by_score"].values())
    assert report["auroc_by_score"]["confidence"] == pytest.approx(report["oos_auroc"])
    assert report["method"] == json.loads((router_dir / "manifest.json").read_text())["calibration"]["method"]
    band = report["cascade"]  # what a CascadeRouter over this router would send to its LLM stage
    assert band["queries"] == band["in_scope"] + band["out_of_scope"] > 0
    assert band["accuracy"] <= band["oracle_accuracy"] <= band["accuracy"] + band["share"] + 1e-9


def test_eval_text_and_plot(router_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "curve.png"
    assert main(["eval", str(TEST), "--router", str(router_dir), "--plot", str(png), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "in-scope accuracy" in out
    assert "OOS AUROC by score  " in out and "mahalanobis" in out
    assert "cascade LLM band" in out and "with an oracle in the band" in out
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
    from routegate.routers import MisrouteLog
    from routegate.routers.misroutes import Misroute

    log = MisrouteLog(tmp_path / "misroutes.jsonl")
    log.record([Misroute("how cold is it outside", "timer", "weather"), Misroute("hmm", "timer", None)])
    out = tmp_path / "r"
    assert main(["fit", "--train", str(TRAIN), "--misroutes", str(log.path), "-o", str(out), "--no-char-ngrams"]) == 0
    assert "adding 1 labelled misroute(s)" in capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["arrays"]["bank"]["shape"][0] == 8 * 25 + 1  # the subset's examples + the labelled misroute
    assert "char_coef" not in manifest["arrays"]
    assert SemanticRouter.load(out).route("how cold is it outside").top == "weather"


# -- errors found before the long part, and never losing a computed report ----------------------------------------
def _latin1(path: Path) -> Path:
    path.write_bytes('{"text": "café", "label": "weather"}\n'.encode("latin-1"))
    return path


def test_fit_and_eval_on_a_file_that_is_not_utf8(
    router_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _latin1(tmp_path / "latin1.jsonl")
    for argv in (
        ["fit", "--train", str(bad), "-o", str(tmp_path / "r")],
        ["eval", str(bad), "--router", str(router_dir)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and err.startswith("error: ")
        assert "not UTF-8 text (byte 0xE9" in err


def test_fit_checks_the_output_before_fitting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert main(["fit", "--train", str(TRAIN), "-o", str(blocker / "router")]) == 2
    err = capsys.readouterr().err
    assert "cannot write to the output directory" in err
    assert "fitting on" not in err  # refused before the fit, not after it
    assert main(["fit", "--train", str(TRAIN), "-o", str(blocker)]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_fit_refuses_degenerate_data_saying_the_minimum(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one_label = tmp_path / "one.jsonl"
    one_label.write_text("".join(json.dumps({"text": f"q{i}", "label": "weather"}) + "\n" for i in range(3)))
    assert main(["fit", "--train", str(one_label), "-o", str(tmp_path / "r")]) == 2
    assert "at least 2 labels" in capsys.readouterr().err
    assert not (tmp_path / "r" / "manifest.json").exists()


def test_eval_checks_the_plot_directory_before_evaluating(
    router_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing" / "dir" / "x.png"
    assert main(["eval", str(TEST), "--router", str(router_dir), "--plot", str(missing), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert "is not a directory; create it first" in captured.err
    assert captured.out == ""


def test_eval_prints_the_report_before_a_failed_plot(
    router_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the target is an existing directory: the check passes, writing the PNG fails after the evaluation
    target = tmp_path / "x.png"
    target.mkdir()
    assert main(["eval", str(TEST), "--router", str(router_dir), "--plot", str(target), "--no-progress"]) == 2
    captured = capsys.readouterr()
    assert "in-scope accuracy" in captured.out  # the report is not lost
    assert captured.err.startswith("error: cannot write the plot to")


def test_eval_unknown_labels_are_refused_or_scored_as_oos(
    router_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "mixed.jsonl"
    rows = [("what is the weather like in boston", "weather"), ("book me a flight", "flights"), ("hmm", "oos")]
    data.write_text("".join(json.dumps({"text": t, "label": label}) + "\n" for t, label in rows))
    assert main(["eval", str(data), "--router", str(router_dir), "--no-progress"]) == 2
    assert "'flights' (1 rows)" in capsys.readouterr().err
    assert main(["eval", str(data), "--router", str(router_dir), "--no-progress", "--json", "--unknown-as-oos"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["unknown_as_oos"] == {"flights": 1}
    assert (report["n_in_scope"], report["n_oos"]) == (1, 2)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["eval", str(empty), "--router", str(router_dir)]) == 2
    assert "no examples" in capsys.readouterr().err
