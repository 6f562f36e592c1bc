"""Static int8 quantisation: the ONNX subset round-trips, the rewrite is what it claims, vectors stay close, and
the shipped encoder is batch-invariant (a text's vector is the same alone and among 32 texts of other lengths)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto
from onnx.helper import make_graph, make_model, make_node, make_opsetid, make_tensor_value_info
from onnx.numpy_helper import from_array, to_array

from routegate.embed import MiniLMEncoder
from routegate.embed.minilm import (
    MODEL_IDS,
    RANGES_FILE,
    _data_path,
    _default_model_path,
    encoder_for_model_id,
    packaged_int8_model,
)
from routegate.embed.quantize import (
    activation_ranges,
    calibration_batches,
    linear_inputs,
    quantize_file,
    quantize_model,
)
from routegate.errors import ConfigurationError

MIXED = [
    "hi",
    "How do I reset my password?",
    "",
    "what's the bitcoin price",
    "a considerably longer sentence about resetting a forgotten password for the customer portal, with details",
    "show me the open tickets of Jane Smith",
    "ok",
    "Which city is customer 3 from? And what is the status of ticket 2, please?",
    "word " * 400,  # truncated at 256 word pieces
    "explain ticket escalation",
    "¿dónde está mi pedido? 注文はどこですか",
    "I was charged twice",
]
BATCH = [f"{text} {i}" if i >= len(MIXED) else text for i, text in enumerate(MIXED * 3)][:32]


def _run(model: bytes, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": x})
    return np.asarray(y)


def _tiny_model(*, int8_weights: bool) -> tuple[bytes, dict[str, np.ndarray[Any, Any]]]:
    """x (.., 8) -> Relu(x @ W1 + b1) -> (.. @ W2) + (x @ W3): float32 or Mul(Cast(int8), scale) weights."""
    rng = np.random.default_rng(0)
    weights = {name: rng.normal(size=(8, 8)).astype(np.float32) for name in ("w1", "w2", "w3")}
    b1 = rng.normal(size=8).astype(np.float32)
    inits = [from_array(b1, "b1")]
    nodes = []
    for name, w in weights.items():
        if int8_weights:
            scale = (np.abs(w).max(axis=0) / 127).astype(np.float32)
            q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
            weights[name] = q.astype(np.float32) * scale
            inits += [from_array(q, f"{name}_q"), from_array(scale.reshape(1, 8), f"{name}_s")]
            nodes += [
                make_node("Cast", [f"{name}_q"], [f"{name}_f"], to=TensorProto.FLOAT),
                make_node("Mul", [f"{name}_f", f"{name}_s"], [name]),
            ]
        else:
            inits.append(from_array(w, name))
    nodes += [  # unnamed nodes, bias first in the Add: both occur in real exports
        make_node("MatMul", ["x", "w1"], ["h1"]),
        make_node("Add", ["b1", "h1"], ["h2"]),
        make_node("Relu", ["h2"], ["h3"]),
        make_node("MatMul", ["h3", "w2"], ["h4"]),
        make_node("MatMul", ["x", "w3"], ["h5"]),
        make_node("MatMul", ["h4", "h5"], ["h6"]),  # two activations: stays float
        make_node("Add", ["h4", "h6"], ["y"]),
    ]
    graph = make_graph(
        nodes,
        "tiny",
        [make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    model = make_model(graph, ir_version=8, opset_imports=[make_opsetid("", 17)])
    return model.SerializeToString(), weights


@pytest.mark.parametrize("int8_weights", [False, True])
def test_linear_layers_become_int8_products_close_to_float(int8_weights: bool) -> None:
    model, _ = _tiny_model(int8_weights=int8_weights)
    assert linear_inputs(model) == ["h3", "x"]
    rng = np.random.default_rng(1)
    calibration = [{"x": rng.normal(size=(4, 8, 8)).astype(np.float32)} for _ in range(4)]
    ranges = activation_ranges(model, calibration)
    assert set(ranges) == {"h3", "x"} and ranges["h3"][0] == 0.0  # after a Relu
    quantized = quantize_model(model, ranges)
    graph = onnx.load_model_from_string(quantized).graph
    ops = [n.op_type for n in graph.node]
    assert ops.count("MatMulIntegerToFloat") == 3
    assert ops.count("QuantizeLinear") == 2  # x is quantised once for the two layers that read it
    assert ops.count("MatMul") == 1 and "Cast" not in ops  # the activation product; the dequantisation is gone
    assert ops.count("Add") == 1  # the bias was folded into its product, the residual-like Add stays
    assert {t.name for t in graph.initializer}.isdisjoint({"w1", "w2", "w3", "w1_q", "w1_s"})
    x = rng.normal(size=(3, 8, 8)).astype(np.float32)  # square: h4 @ h5 multiplies two activations
    reference, approx = _run(model, x), _run(quantized, x)
    assert np.abs(approx - reference).max() < 0.1 * np.abs(reference).max()
    assert not np.array_equal(approx, reference)


def test_int8_weights_are_kept_as_stored() -> None:
    model, _ = _tiny_model(int8_weights=True)
    quantized = quantize_model(model, {"x": (-3.0, 3.0), "h3": (0.0, 9.0)})
    stored = {t.name: to_array(t) for t in onnx.load_model_from_string(model).graph.initializer}
    rewritten = {t.name: to_array(t) for t in onnx.load_model_from_string(quantized).graph.initializer}
    int8 = [a for a in rewritten.values() if a.dtype == np.int8]
    assert len(int8) == 3
    assert any(np.array_equal(a, stored["w1_q"]) for a in int8)


def test_missing_ranges_and_empty_calibration_are_refused() -> None:
    model, _ = _tiny_model(int8_weights=False)
    with pytest.raises(ConfigurationError, match="no activation range"):
        quantize_model(model, {"x": (-1.0, 1.0)})
    with pytest.raises(ConfigurationError, match="not finite"):
        quantize_model(model, {"x": (-1.0, 1.0), "h3": (0.0, float("inf"))})
    with pytest.raises(ConfigurationError, match="no calibration batches"):
        activation_ranges(model, [])


def test_packaged_int8_model_has_int8_products() -> None:
    graph = onnx.load_model_from_string(packaged_int8_model()).graph
    ops = [n.op_type for n in graph.node]
    assert ops.count("MatMulIntegerToFloat") == 36  # 6 layers x (q, k, v, attention output, 2 feed-forward)
    assert ops.count("MatMul") == 12  # attention scores and weighted values, float32
    assert "DynamicQuantizeLinear" not in ops


def test_ranges_of_another_model_file_are_refused(tmp_path: Path) -> None:
    ranges = json.loads(_data_path(RANGES_FILE).read_text())
    ranges["model_sha256"] = "0" * 64
    (tmp_path / "ranges.json").write_text(json.dumps(ranges))
    with pytest.raises(ConfigurationError, match="compute='float32'"):
        packaged_int8_model(ranges_path=tmp_path / "ranges.json")


def test_quantize_file_calibrates_on_texts(tmp_path: Path) -> None:
    """The entry point for a float32 export (e.g. a fine-tuned one); here the packaged file stands in for it."""
    target = tmp_path / "int8.onnx"
    texts = ["reset my password", "what is the weather", "book a table for two", "hi"]
    ranges = quantize_file(_default_model_path(), target, texts)
    assert len(ranges) == 24
    shipped = json.loads(_data_path(RANGES_FILE).read_text())["ranges"]
    assert set(ranges) == set(shipped)
    vectors = MiniLMEncoder(model_path=target).encode(texts)
    reference = MiniLMEncoder(compute="float32").encode(texts)
    assert float(np.min(np.sum(vectors * reference, axis=1))) > 0.9
    with pytest.raises(ConfigurationError, match="needs calibration texts"):
        quantize_file(_default_model_path(), target, [])


def test_calibration_batches_are_unpadded() -> None:
    from routegate.embed.minilm import load_tokenizer

    batches = list(
        calibration_batches(
            ["a", "b", "a b c", "hello there"], load_tokenizer(), input_names=("input_ids", "attention_mask")
        )
    )
    assert [b["input_ids"].shape for b in batches] == [(2, 3), (1, 4), (1, 5)]
    assert all(b["attention_mask"].all() and "token_type_ids" not in b for b in batches)


@pytest.fixture(scope="module", params=["int8", "float32"])
def shipped(request: pytest.FixtureRequest) -> MiniLMEncoder:
    encoder = MiniLMEncoder(compute=request.param, intra_op_num_threads=1)
    encoder.warm_up()
    return encoder


def test_shipped_encoder_is_batch_invariant(shipped: MiniLMEncoder) -> None:
    """A text's vector is the same (within 1e-6) alone and among 32 texts of other lengths (so padded to the
    longest): routing must not depend on which other requests share the server's encoder pass."""
    lengths = {len(shipped._tokenizer.encode(t).ids) for t in BATCH}  # type: ignore[union-attr]
    assert len(BATCH) == 32 and len(lengths) >= 8
    together = shipped.encode(BATCH)
    alone = np.vstack([shipped.encode([text]) for text in BATCH])
    assert float(np.abs(together - alone).max()) <= 1e-6
    shuffled = np.random.default_rng(0).permutation(32)
    assert float(np.abs(shipped.encode([BATCH[i] for i in shuffled]) - together[shuffled]).max()) <= 1e-6


def test_int8_vectors_stay_close_to_float32() -> None:
    int8 = MiniLMEncoder().encode(MIXED)
    float32 = MiniLMEncoder(compute="float32").encode(MIXED)
    cosines = np.sum(int8 * float32, axis=1)
    assert float(cosines.min()) > 0.95 and float(cosines.mean()) > 0.98
    assert not np.array_equal(int8, float32)


def test_compute_modes_have_their_own_model_ids(tmp_path: Path) -> None:
    assert MiniLMEncoder().model_id == MODEL_IDS["int8"] != MiniLMEncoder(compute="float32").model_id
    assert MiniLMEncoder(compute="float32").model_id == "sentence-transformers/all-MiniLM-L6-v2:int8-onnx"
    assert "compute='int8'" in repr(MiniLMEncoder())
    with pytest.raises(ConfigurationError, match="compute must be one of"):
        MiniLMEncoder(compute="int4")  # type: ignore[arg-type]  # the misuse under test
    with pytest.raises(ConfigurationError, match="runs as it is"):
        MiniLMEncoder(model_path=tmp_path / "m.onnx", compute="int8")


def test_a_saved_model_id_finds_its_encoder() -> None:
    for compute, model_id in MODEL_IDS.items():
        encoder = encoder_for_model_id(model_id, intra_op_num_threads=1)
        assert encoder is not None and (encoder.compute, encoder.model_id) == (compute, model_id)
        assert encoder.intra_op_num_threads == 1
    assert encoder_for_model_id("hashing-256") is None
