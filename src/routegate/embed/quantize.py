"""Static int8 quantisation of a transformer encoder's linear layers, batch-invariant by construction.

Every matrix product of the model with a constant weight (``MatMul(x, W)``, ``W`` a float32 initializer or
int8 weights dequantised by ``Mul(Cast(W_q), scale)`` as in the packaged MiniLM) becomes::

    x_q = QuantizeLinear(x, a_scale, a_zero_point)                      # uint8, one fixed scale per tensor
    y   = MatMulIntegerToFloat(x_q, W_q, a_scale, w_scale, a_zero_point, bias)   # int8 weights per column

The activation scales are **fixed**: measured once on calibration texts (:func:`activation_ranges`), not taken
from the batch at run time as dynamic quantisation does. So a text's vector does not depend on the texts it is
batched with (onnxruntime's dynamic ``DynamicQuantizeLinear`` takes one scale over the whole batch, padding
included), and the integer products are exact. Weights keep their int8 values when the model already stores them
per output column; float32 weights are quantised symmetrically per output column. The bias ``Add`` after a
product is folded into it, and products that read the same tensor share one ``QuantizeLinear``. Products of two
activations (attention scores) stay in float32.

Torch-free: the graph is read and rewritten with the ``onnx`` package, run by onnxruntime; it runs wherever the
encoder runs (this module is imported only when an int8 encoder loads). Entry points:

* :func:`quantize_file` — a float32 ONNX file and calibration texts in, the int8 file out (e.g. a fine-tuned
  export);
* :func:`activation_ranges` + :func:`quantize_model` — the two halves, on model bytes (the packaged encoder ships
  its ranges and only runs the second half at load);
* :func:`fuse_for_onnxruntime` — the int8 model with onnxruntime's portable fusions applied once, as the packaged
  encoder's cached file holds it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from routegate._extras import needs

with needs("embed"):
    import numpy as np
    import onnx
    import onnx.helper
    import onnx.numpy_helper

from routegate.errors import ConfigurationError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

Feeds = dict[str, np.ndarray[Any, Any]]
Ranges = dict[str, tuple[float, float]]
MS_DOMAIN = "com.microsoft"
SCHEME = (
    "static int8: uint8 activations with fixed per-tensor scales (calibrated), int8 weights per output column, "
    "MatMulIntegerToFloat; batch-invariant"
)


@dataclass(frozen=True, slots=True)
class _Linear:
    product: str  # the MatMul's output (names the layer: node names are optional in ONNX)
    input: str  # the activation it reads
    weight: np.ndarray[Any, np.dtype[np.int8]]  # (K, N)
    scale: np.ndarray[Any, np.dtype[np.float32]]  # (N,)
    bias: str | None  # a 1-D initializer added to the product, folded into it
    bias_sum: str | None  # the output of the Add that adds it (that Add is removed)
    output: str  # what the linear layer produces (the Add's output when the bias is folded)


def _linears(model: Any) -> list[_Linear]:
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    graph_outputs = {o.name for o in graph.output}
    found: list[_Linear] = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.input) != 2:
            continue
        weights = _int8_weights(node.input[1], inits, producer)
        if weights is None:
            continue
        q, scale = weights
        bias, bias_sum, output = None, None, node.output[0]
        users = consumers.get(output, [])
        if len(users) == 1 and output not in graph_outputs and users[0].op_type == "Add" and not users[0].domain:
            add = users[0]
            other = add.input[1] if add.input[0] == output else add.input[0]
            if (
                other in inits
                and tuple(inits[other].dims) == (q.shape[1],)
                and inits[other].data_type == onnx.TensorProto.FLOAT
            ):
                bias, bias_sum, output = other, add.output[0], add.output[0]
        found.append(_Linear(node.output[0], node.input[0], q, scale, bias, bias_sum, output))
    return found


def _int8_weights(
    name: str, inits: Mapping[str, Any], producer: Mapping[str, Any]
) -> tuple[np.ndarray[Any, np.dtype[np.int8]], np.ndarray[Any, np.dtype[np.float32]]] | None:
    """The int8 weights (K, N) and per-column scales (N,) behind the constant ``name``, or None if it is not one."""
    if name in inits:
        tensor = inits[name]
        if tensor.data_type != onnx.TensorProto.FLOAT or len(tensor.dims) != 2:
            return None
        w = onnx.numpy_helper.to_array(tensor)
        scale = np.maximum(np.abs(w).max(axis=0) / 127.0, np.finfo(np.float32).tiny).astype(np.float32)
        return np.clip(np.rint(w / scale), -127, 127).astype(np.int8), scale
    mul = producer.get(name)  # Mul(Cast(W_q), scale): int8 weights stored per output column, dequantised at load
    if mul is None or mul.op_type != "Mul" or len(mul.input) != 2:
        return None
    cast = producer.get(mul.input[0])
    if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits or mul.input[1] not in inits:
        return None
    q_tensor, s_tensor = inits[cast.input[0]], inits[mul.input[1]]
    if (
        q_tensor.data_type != onnx.TensorProto.INT8
        or len(q_tensor.dims) != 2
        or s_tensor.data_type != onnx.TensorProto.FLOAT
    ):
        return None
    q = onnx.numpy_helper.to_array(q_tensor)
    scale = onnx.numpy_helper.to_array(s_tensor).astype(np.float32)
    if scale.size == 1:
        scale = np.full(q.shape[1], float(scale.reshape(())), dtype=np.float32)
    if scale.size != q.shape[1] or scale.shape not in ((q.shape[1],), (1, q.shape[1])):
        return None  # not per output column (e.g. per input row): not this pattern
    return q, scale.reshape(-1)


def linear_inputs(model_bytes: bytes) -> list[str]:
    """The activations the linear layers of ``model_bytes`` read: what :func:`activation_ranges` measures."""
    return sorted({lin.input for lin in _linears(onnx.load_model_from_string(model_bytes))})


def activation_ranges(model_bytes: bytes, batches: Iterable[Feeds]) -> Ranges:
    """Run the float model over ``batches`` (onnxruntime feeds) and return, for every activation a linear layer
    reads, its ``(min, max)`` over all elements. Feed unpadded batches (:func:`calibration_batches`): padding
    positions are not text and would widen the ranges."""
    with needs("embed"):
        import onnxruntime as ort

    model = onnx.load_model_from_string(model_bytes)
    names = sorted({lin.input for lin in _linears(model)})
    if not names:
        raise ConfigurationError("the model has no MatMul with a constant weight: nothing to quantise")
    existing = {o.name for o in model.graph.output}
    model.graph.output.extend(
        onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names if n not in existing
    )
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"])
    low = dict.fromkeys(names, np.inf)
    high = dict.fromkeys(names, -np.inf)
    runs = 0
    for feeds in batches:
        for name, value in zip(names, session.run(names, feeds), strict=True):
            low[name] = min(low[name], float(np.min(value)))
            high[name] = max(high[name], float(np.max(value)))
        runs += 1
    if runs == 0:
        raise ConfigurationError("no calibration batches: activation ranges need at least one")
    return {name: (low[name], high[name]) for name in names}


def calibration_batches(
    texts: Sequence[str], tokenizer: Tokenizer, *, input_names: Sequence[str], batch_size: int = 64
) -> Iterator[Feeds]:
    """Tokenised ``texts`` as feeds, texts of one length per batch (no padding), in a fixed order."""
    by_length: dict[int, list[list[int]]] = {}
    for encoding in tokenizer.encode_batch([str(t) for t in texts]):
        by_length.setdefault(len(encoding.ids), []).append(list(encoding.ids))
    for _, rows in sorted(by_length.items()):
        for start in range(0, len(rows), batch_size):
            ids = np.asarray(rows[start : start + batch_size], dtype=np.int64)
            feeds: Feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in input_names:
                feeds["token_type_ids"] = np.zeros_like(ids)
            yield feeds


def _uint8_params(low: float, high: float) -> tuple[np.float32, np.uint8]:
    """Scale and zero point of an asymmetric uint8 quantisation covering ``[low, high]`` (and 0)."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / 255.0 if high > low else 1.0
    zero_point = int(np.clip(round(-low / scale), 0, 255))
    return np.float32(scale), np.uint8(zero_point)


def quantize_model(model_bytes: bytes, ranges: Mapping[str, Sequence[float]]) -> bytes:
    """Rewrite every linear layer of ``model_bytes`` into static int8 (see the module doc) with the activation
    ``ranges`` (from :func:`activation_ranges`); returns the new model's bytes."""
    model = onnx.load_model_from_string(model_bytes)
    graph = model.graph
    linears = _linears(model)
    if not linears:
        raise ConfigurationError("the model has no MatMul with a constant weight: nothing to quantise")
    missing = sorted({lin.input for lin in linears} - set(ranges))
    if missing:
        raise ConfigurationError(f"no activation range for {len(missing)} linear input(s), e.g. {missing[0]!r}")
    replaced: dict[str, list[Any]] = {}
    dropped: set[str] = set()
    quantized: set[str] = set()
    for lin in linears:
        prefix = f"routegate_q/{lin.product}"
        a_in = f"routegate_q/{lin.input}"
        low, high = (float(v) for v in ranges[lin.input])
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ConfigurationError(f"the activation range of {lin.input!r} is not finite: {low}, {high}")
        a_scale, a_zero = _uint8_params(low, high)
        nodes = []
        if lin.input not in quantized:  # one QuantizeLinear per activation, shared by the layers that read it
            quantized.add(lin.input)
            graph.initializer.extend(
                [
                    onnx.numpy_helper.from_array(np.asarray(a_scale), f"{a_in}/scale"),
                    onnx.numpy_helper.from_array(np.asarray(a_zero), f"{a_in}/zero_point"),
                ]
            )
            nodes.append(
                onnx.helper.make_node(
                    "QuantizeLinear",
                    [lin.input, f"{a_in}/scale", f"{a_in}/zero_point"],
                    [f"{a_in}/u8"],
                    name=f"{a_in}/quantize",
                )
            )
        graph.initializer.extend(
            [
                onnx.numpy_helper.from_array(lin.weight, f"{prefix}/weight"),
                onnx.numpy_helper.from_array(lin.scale, f"{prefix}/weight_scale"),
            ]
        )
        inputs = [f"{a_in}/u8", f"{prefix}/weight", f"{a_in}/scale", f"{prefix}/weight_scale", f"{a_in}/zero_point"]
        if lin.bias is not None:
            inputs += ["", lin.bias]  # no weight zero point (symmetric), then the bias
            assert lin.bias_sum is not None
            dropped.add(lin.bias_sum)
        nodes.append(
            onnx.helper.make_node(
                "MatMulIntegerToFloat", inputs, [lin.output], name=f"{prefix}/matmul", domain=MS_DOMAIN
            )
        )
        replaced[lin.product] = nodes
    rebuilt = []
    for node in graph.node:
        if node.op_type == "Add" and node.output[0] in dropped:
            continue
        rebuilt.extend(replaced.get(node.output[0], [node]) if node.op_type == "MatMul" else [node])
    del graph.node[:]
    graph.node.extend(rebuilt)
    _prune(graph)
    if not any(op.domain == MS_DOMAIN for op in model.opset_import):
        model.opset_import.append(onnx.helper.make_opsetid(MS_DOMAIN, 1))
    data: bytes = model.SerializeToString()
    return data


def fuse_for_onnxruntime(model_bytes: bytes) -> bytes:
    """``model_bytes`` with onnxruntime's graph rewrites up to its ``EXTENDED`` level applied (operator fusions:
    attention, GELU, layer normalisation...), as onnxruntime saves them: a session made from the result skips that
    work (about half of a session's start). The rewrites are exact (the vectors are bit for bit those of the model
    as given) and, unlike the ``ALL`` level's memory layouts, not specific to the CPU they ran on; they are
    specific to the onnxruntime version, which is why the model cache's key names it."""
    with needs("embed"):
        import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="routegate-fuse-") as scratch:
        fused = Path(scratch) / "fused.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = str(fused)
        options.log_severity_level = 3
        ort.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])
        return fused.read_bytes()


def _prune(graph: Any) -> None:
    """Drop the nodes and initializers nothing reads any more (the dequantisation of replaced weights)."""
    keep_outputs = {o.name for o in graph.output}
    nodes = list(graph.node)
    while True:
        used = keep_outputs | {name for node in nodes for name in node.input}
        alive = [node for node in nodes if any(out in used for out in node.output)]
        if len(alive) == len(nodes):
            break
        nodes = alive
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in nodes for name in node.input} | keep_outputs
    initializers = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(initializers)


def quantize_file(
    source: str | Path,
    target: str | Path,
    texts: Sequence[str],
    *,
    tokenizer_path: str | Path | None = None,
    max_tokens: int = 256,
) -> Ranges:
    """Quantise the float32 ONNX encoder ``source`` into ``target`` (static int8, batch-invariant), with
    activation ranges calibrated on ``texts`` (a few hundred to a thousand representative texts, e.g. training
    utterances). ``tokenizer_path``: the model's ``tokenizer.json`` (default: MiniLM's, shipped with routegate).
    Returns the ranges used."""
    from routegate.embed._tokenizer import load_tokenizer

    if not texts:
        raise ConfigurationError("quantize_file needs calibration texts, got none")
    model_bytes = Path(source).read_bytes()
    tokenizer = load_tokenizer(tokenizer_path, max_tokens=max_tokens)
    inputs = _input_names(model_bytes)
    ranges = activation_ranges(model_bytes, calibration_batches(texts, tokenizer, input_names=inputs))
    Path(target).write_bytes(quantize_model(model_bytes, ranges))
    return ranges


def _input_names(model_bytes: bytes) -> list[str]:
    model = onnx.load_model_from_string(model_bytes)
    initializers = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]
