"""The one place the fine-tuned encoder is quantised: float32 ONNX in, int8 ONNX out.

Dynamic quantisation, int8 weights per output channel, activations quantised at run time (onnxruntime's
``quantize_dynamic``): on CLINC150 it kept the float model's accuracy (static QDQ with calibrated activation scales
lost 1.3 points in-scope) and runs a short query in ~1.3 ms on one thread. Its activation scale comes from a pass's
whole input, so :class:`~routegate.routers.finetune.FinetunedEncoder` runs one text per pass. A batch-invariant
scheme would replace this function (and could lift that restriction); nothing else depends on how it quantises.
"""

from __future__ import annotations

import logging
from pathlib import Path

SCHEME = "onnxruntime quantize_dynamic: int8 weights per channel, dynamic int8 activations; one text per pass"


def quantize_int8(source: Path, target: Path) -> str:
    """Quantise the float32 ONNX model ``source`` into ``target``; returns the scheme's description."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    root.addFilter(_drop_preprocessing_hint)
    try:
        quantize_dynamic(source, target, per_channel=True, weight_type=QuantType.QInt8)
    finally:
        root.removeFilter(_drop_preprocessing_hint)
    return SCHEME


def _drop_preprocessing_hint(record: logging.LogRecord) -> bool:
    """``quantize_dynamic`` logs a hint about pre-processing on the root logger on every call (it applies to
    static quantisation of image models, not to this)."""
    return not str(record.msg).startswith("Please consider to run pre-processing")
