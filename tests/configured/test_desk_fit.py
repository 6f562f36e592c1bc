"""``routegate fit --desk DIR`` (and ``--finetune``): a router fitted on the desk's own examples — generated and
hand-edited — saved in the desk, named by ``[router] fitted`` in its desk.toml, and the one the desk then routes
with (``route``, ``eval``, ``ask``). These tests need no database: they route offline."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import sys
from pathlib import Path

import pytest

from routegate.apps.configured.config import DeskConfigError, builtin_desk_dir, load_config
from routegate.apps.configured.fitted import training_examples
from routegate.cli import main

MONEY_BACK = "Is getting reimbursed possible?"  # no rule decides it: the embedding layer does


@pytest.fixture
def desk(tmp_path: Path) -> Path:
    """A copy of the built-in desk's directory (fit writes into it), routing with the nearest examples until fitted
    (the built-in configuration fits its layer at start: ``[router] fit_at_start``)."""
    copy = Path(shutil.copytree(builtin_desk_dir(), tmp_path / "support"))
    toml = copy / "desk.toml"
    text = toml.read_text(encoding="utf-8")
    assert "fit_at_start = true\n" in text
    toml.write_text(text.replace("fit_at_start = true\n", "fit_at_start = false\n"), encoding="utf-8")
    return copy


def _route(desk: Path, text: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main(["route", "--desk", str(desk), text, "--json"]) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_the_examples_are_the_training_data_labelled_by_their_kind(desk: Path) -> None:
    toml = desk / "desk.toml"
    toml.write_text(
        toml.read_text(encoding="utf-8").replace('  "sorry",\n', '  "sorry",\n  "a hand-written one",\n'),
        encoding="utf-8",
    )
    examples = training_examples(load_config(desk))
    labels = {e.text: e.label for e in examples}
    assert labels["a hand-written one"] == "LLM" and labels["show open support tickets"] == "POSTGRES"
    assert labels["what is bitcoin trading at"] == "EXTERNAL" and labels["what does your policy say"] == "VECTOR"
    assert len(examples) == sum(len(r.examples) for r in load_config(desk).routes)


def test_fit_saves_the_router_in_the_desk_and_the_desk_routes_with_it(
    desk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _route(desk, MONEY_BACK, capsys)
    original = (desk / "desk.toml").read_text(encoding="utf-8")

    assert main(["fit", "--desk", str(desk), "--no-progress", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["router"] == str(desk / "router") and summary["routes"] == 4
    assert captured.out == json.dumps(summary, indent=2) + "\n"  # --json: the block fit always printed
    assert set(summary) == {"router", "routes", "fit_seconds", "calibration"} and "grid" not in summary["calibration"]
    assert f"{desk / 'desk.toml'}: [router] fitted = 'router': the desk routes with it" in captured.err

    text = (desk / "desk.toml").read_text(encoding="utf-8")
    assert text == original.replace("[router]\n", '[router]\nfitted = "router"\n', 1)  # comments and all kept
    assert load_config(desk).router.fitted == "router"
    threshold = json.loads((desk / "router" / "manifest.json").read_text())["calibration"]["threshold"]
    after = _route(desk, MONEY_BACK, capsys)
    assert after["route"] == before["route"] == "VECTOR" and after["layer"] == "semantic"
    assert f"vs threshold {threshold:.3f}" in str(after["why"])  # the fitted router's calibration decided
    assert f"vs threshold {threshold:.3f}" not in str(before["why"])

    assert main(["fit", "--desk", str(desk), "--no-progress"]) == 0  # again: the field is replaced, not repeated
    short = capsys.readouterr().out.splitlines()  # without --json: three lines a person reads
    assert len(short) == 3 and short[0].startswith(f"saved {desk / 'router'}: 4 routes, fitted in ")
    cal = json.loads((desk / "router" / "manifest.json").read_text())["calibration"]
    assert short[1] == (
        f"calibrated on {cal['source']} ({cal['examples']} examples): in-scope accuracy "
        f"{100 * cal['in_scope_accuracy']:.1f} %, in-scope routed {100 * cal['coverage']:.1f} %; threshold "
        f"{cal['threshold']:.3f}"
    )
    assert short[2] == "(--json prints every figure of the calibration)"
    assert (desk / "desk.toml").read_text(encoding="utf-8").count("fitted =") == 1


def test_eval_measures_the_fitted_router(desk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"text": MONEY_BACK, "route": "VECTOR"}) + "\n", encoding="utf-8")
    assert main(["fit", "--desk", str(desk), "-o", str(tmp_path / "elsewhere"), "--no-progress"]) == 0
    capsys.readouterr()
    assert load_config(desk).router.fitted == str((tmp_path / "elsewhere").resolve())  # outside the desk: absolute
    assert main(["eval", "--desk", str(desk), str(questions), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["correct"] == 1


def test_changed_examples_are_said_at_start(
    desk: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    assert main(["fit", "--desk", str(desk), "--no-progress"]) == 0
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="routegate.apps.configured.fitted"):
        _route(desk, "hello", capsys)
    assert "was not fitted" not in caplog.text  # as fitted
    toml = desk / "desk.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace('"hey",', '"hey", "yo",', 1), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="routegate.apps.configured.fitted"):
        _route(desk, "hello", capsys)
    assert "was not fitted on this desk's examples as they are now" in caplog.text
    assert "routegate fit --desk DIR" in caplog.text


def test_a_fitted_field_naming_no_router_is_refused(desk: Path) -> None:
    toml = desk / "desk.toml"
    toml.write_text(toml.read_text(encoding="utf-8").replace("[router]\n", '[router]\nfitted = "gone"\n'), "utf-8")
    with pytest.raises(DeskConfigError, match=r"desk\.toml: router\.fitted: .*gone holds no saved router"):
        load_config(desk)


def test_options_that_mean_nothing_for_a_desk_are_refused(desk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--desk", str(desk), "--default-route", "chat"]) == 2
    assert "--default-route and --oos-label do not apply with --desk" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "--desk", str(desk), "--train", "x.jsonl"])
    assert "not allowed with argument" in capsys.readouterr().err
    assert main(["fit", "--train", "x.jsonl"]) == 2
    assert "fit --train needs -o DIR" in capsys.readouterr().err
    toml = desk / "desk.toml"
    without_tools = toml.read_text(encoding="utf-8").split('[[routes]]\nname = "weather"')[0]
    toml.write_text(without_tools, encoding="utf-8")
    val = desk.parent / "val.jsonl"
    val.write_text(json.dumps({"text": "bitcoin price", "route": "EXTERNAL"}) + "\n", encoding="utf-8")
    assert main(["fit", "--desk", str(desk), "--val", str(val)]) == 2
    assert f"{val}: questions labelled EXTERNAL, but {toml} has no route with examples" in capsys.readouterr().err
    assert not (desk / "router").exists()


def test_finetune_without_the_training_extra_names_it(
    desk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what an install without the extra looks like to imports
    questions = tmp_path / "val.jsonl"
    questions.write_text(json.dumps({"text": MONEY_BACK, "route": "VECTOR"}) + "\n", encoding="utf-8")
    original = (desk / "desk.toml").read_text(encoding="utf-8")
    assert main(["fit", "--desk", str(desk), "--finetune", "--val", str(questions)]) == 2
    pip = f"{sys.executable} -m pip install 'routegate[train]'"
    assert f"error: fine-tuning needs the 'routegate[train]' extra: {pip} (missing: torch)" in capsys.readouterr().err
    assert not (desk / "router").exists() and (desk / "desk.toml").read_text(encoding="utf-8") == original


TRAIN_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers", "onnx"))


@pytest.mark.skipif(not TRAIN_EXTRA, reason="fine-tuning needs the routegate[train] extra (torch), not installed")
def test_finetune_fits_on_the_desk_and_the_desk_loads_its_encoder(
    desk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    routes = Path(__file__).resolve().parents[1] / "data" / "support_routes.jsonl"
    val = desk.parent / "val.jsonl"
    lines = [json.loads(line) for line in routes.read_text(encoding="utf-8").splitlines()]
    val.write_text("".join(json.dumps(r) + "\n" for r in lines if r["split"] == "dev"), encoding="utf-8")
    args = ["fit", "--desk", str(desk), "--finetune", "--val", str(val), "--threads", "1", "--no-progress", "--json"]
    assert main([*args, "--finetune-objectives", "contrastive", "--finetune-epochs", "1"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["finetune"]["candidates"] == 2  # the encoder as shipped, and one fine-tuned epoch
    manifest = json.loads((desk / "router" / "manifest.json").read_text())
    assert ("file" in manifest["encoder"]) == summary["finetune"]["finetuned"]
    decided = _route(desk, MONEY_BACK, capsys)
    threshold = manifest["calibration"]["threshold"]
    assert decided["layer"] == "semantic" and f"vs threshold {threshold:.3f}" in str(decided["why"])
