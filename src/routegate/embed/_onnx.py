"""Just enough of the ONNX file format to read and rewrite a model without the ``onnx`` package.

An ONNX model is a protocol buffer (``onnx.proto``: its field numbers are frozen by the format's compatibility
rules). ``protobuf`` is already installed wherever onnxruntime is (it depends on it), so this module declares the
few messages and fields routegate touches — model, graph, node, attribute, tensor, value info, opset — in a private
descriptor pool (no clash with ``onnx``'s own classes when both are imported). Fields not declared here survive a
parse/serialise round trip as unknown fields, so a rewritten model keeps everything it had.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

# onnx.TensorProto.DataType values used here, and their numpy types
FLOAT, UINT8, INT8, INT32, INT64, BOOL = 1, 2, 3, 6, 7, 9
_NUMPY: dict[int, type[np.generic]] = {
    FLOAT: np.float32,
    UINT8: np.uint8,
    INT8: np.int8,
    INT32: np.int32,
    INT64: np.int64,
    BOOL: np.bool_,
}
_NUMPY_CODE = {np.dtype(v): k for k, v in _NUMPY.items()}
# AttributeProto.AttributeType
ATTR_INT = 2

_OPTIONAL, _REPEATED = 1, 3
_INT64, _INT32, _FLOAT, _STRING, _BYTES, _MESSAGE = 3, 5, 2, 9, 12, 11

# (message, [(field, number, label, type, message type name)]) — names and numbers as in onnx.proto
_SCHEMA: list[tuple[str, list[tuple[str, int, int, int, str]]]] = [
    ("OperatorSetIdProto", [("domain", 1, _OPTIONAL, _STRING, ""), ("version", 2, _OPTIONAL, _INT64, "")]),
    (
        "TensorProto",
        [
            ("dims", 1, _REPEATED, _INT64, ""),
            ("data_type", 2, _OPTIONAL, _INT32, ""),
            ("float_data", 4, _REPEATED, _FLOAT, ""),
            ("int32_data", 5, _REPEATED, _INT32, ""),
            ("int64_data", 7, _REPEATED, _INT64, ""),
            ("name", 8, _OPTIONAL, _STRING, ""),
            ("raw_data", 9, _OPTIONAL, _BYTES, ""),
            ("data_location", 14, _OPTIONAL, _INT32, ""),
        ],
    ),
    (
        "AttributeProto",
        [
            ("name", 1, _OPTIONAL, _STRING, ""),
            ("f", 2, _OPTIONAL, _FLOAT, ""),
            ("i", 3, _OPTIONAL, _INT64, ""),
            ("s", 4, _OPTIONAL, _BYTES, ""),
            ("t", 5, _OPTIONAL, _MESSAGE, "TensorProto"),
            ("ints", 8, _REPEATED, _INT64, ""),
            ("type", 20, _OPTIONAL, _INT32, ""),
        ],
    ),
    (
        "NodeProto",
        [
            ("input", 1, _REPEATED, _STRING, ""),
            ("output", 2, _REPEATED, _STRING, ""),
            ("name", 3, _OPTIONAL, _STRING, ""),
            ("op_type", 4, _OPTIONAL, _STRING, ""),
            ("attribute", 5, _REPEATED, _MESSAGE, "AttributeProto"),
            ("domain", 7, _OPTIONAL, _STRING, ""),
        ],
    ),
    ("TensorTypeProto", [("elem_type", 1, _OPTIONAL, _INT32, "")]),  # onnx's TypeProto.Tensor, shape left out
    ("TypeProto", [("tensor_type", 1, _OPTIONAL, _MESSAGE, "TensorTypeProto")]),
    ("ValueInfoProto", [("name", 1, _OPTIONAL, _STRING, ""), ("type", 2, _OPTIONAL, _MESSAGE, "TypeProto")]),
    (
        "GraphProto",
        [
            ("node", 1, _REPEATED, _MESSAGE, "NodeProto"),
            ("name", 2, _OPTIONAL, _STRING, ""),
            ("initializer", 5, _REPEATED, _MESSAGE, "TensorProto"),
            ("input", 11, _REPEATED, _MESSAGE, "ValueInfoProto"),
            ("output", 12, _REPEATED, _MESSAGE, "ValueInfoProto"),
        ],
    ),
    (
        "ModelProto",
        [
            ("ir_version", 1, _OPTIONAL, _INT64, ""),
            ("producer_name", 2, _OPTIONAL, _STRING, ""),
            ("graph", 7, _OPTIONAL, _MESSAGE, "GraphProto"),
            ("opset_import", 8, _REPEATED, _MESSAGE, "OperatorSetIdProto"),
        ],
    ),
]
_PACKAGE = "routegate_onnx_subset"


@cache
def _classes() -> dict[str, Any]:
    from google.protobuf import (  # type: ignore[import-untyped]  # no stubs in the dev extra; typed as Any here
        descriptor_pb2,
        descriptor_pool,
        message_factory,
    )

    file = descriptor_pb2.FileDescriptorProto(name="routegate_onnx_subset.proto", package=_PACKAGE, syntax="proto2")
    for message, fields in _SCHEMA:
        proto = file.message_type.add(name=message)
        for name, number, label, kind, type_name in fields:
            field = proto.field.add(name=name, number=number, label=label, type=kind)
            if type_name:
                field.type_name = f".{_PACKAGE}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        message: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{message}"))
        for message, _ in _SCHEMA
    }


def parse_model(data: bytes) -> Any:
    """A ``ModelProto`` (this module's subset) from the bytes of an ONNX file."""
    model = _classes()["ModelProto"]()
    model.ParseFromString(data)
    return model


def new(message: str, **fields: Any) -> Any:
    """A fresh message of this subset, e.g. ``new("NodeProto", op_type="Add", input=["a", "b"], output=["c"])``."""
    return _classes()[message](**fields)


def to_array(tensor: Any) -> np.ndarray[Any, Any]:
    """The value of a ``TensorProto`` as a numpy array (raw or typed storage; external data is refused)."""
    if tensor.data_location == 1:
        raise ValueError(f"tensor {tensor.name!r} is stored outside the model file (external data)")
    dtype = _NUMPY.get(tensor.data_type)
    if dtype is None:
        raise ValueError(f"tensor {tensor.name!r} has data type {tensor.data_type}, not one of {sorted(_NUMPY)}")
    shape = tuple(tensor.dims)
    if tensor.raw_data:
        return np.frombuffer(tensor.raw_data, dtype=dtype).reshape(shape).copy()
    if tensor.data_type == FLOAT:
        values: Any = tensor.float_data
    elif tensor.data_type == INT64:
        values = tensor.int64_data
    else:  # the int32 field holds every smaller integer type
        values = tensor.int32_data
    return np.asarray(values, dtype=dtype).reshape(shape)


def from_array(array: np.ndarray[Any, Any], name: str) -> Any:
    """A ``TensorProto`` named ``name`` holding ``array`` (raw little-endian storage, as onnx writes it)."""
    code = _NUMPY_CODE.get(array.dtype)
    if code is None:
        raise ValueError(f"cannot store a {array.dtype} array as an ONNX tensor")
    contiguous = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    return new("TensorProto", name=name, dims=list(array.shape), data_type=code, raw_data=contiguous.tobytes())


def float_output(name: str) -> Any:
    """A graph output ``name`` of float32 elements (shape left to the runtime)."""
    return new("ValueInfoProto", name=name, type=new("TypeProto", tensor_type=new("TensorTypeProto", elem_type=FLOAT)))
