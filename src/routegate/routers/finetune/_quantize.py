"""The one place the fine-tuned encoder is quantised: float32 ONNX in, int8 ONNX out.

The embedded encoder's scheme (:mod:`routegate.embed.quantize`): int8 weights per output column, uint8 activations
with *fixed* per-tensor scales calibrated on training texts, integer products. A text's vector is the same alone
and in any batch (dynamic quantisation takes its activation scale from a pass's whole input, so it would depend on
the batch mates). On CLINC150 the fine-tuned encoder (contrastive, 2 epochs) measured val in-scope 96.2 % with it
against 96.1 % with dynamic per-channel quantisation, at the same speed per text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from routegate._extras import needs

with needs("embed"):
    import numpy as np

CALIBRATION_TEXTS = 1000


def quantize_int8(source: Path, target: Path, texts: Sequence[str], *, seed: int = 0) -> str:
    """Quantise the float32 ONNX model ``source`` into ``target``, its activation ranges measured on (a seeded
    sample of at most ``CALIBRATION_TEXTS`` of) ``texts``; returns the scheme's description."""
    from routegate.embed.quantize import SCHEME, quantize_file

    sample = list(texts)
    if len(sample) > CALIBRATION_TEXTS:
        picked = np.random.default_rng(seed).choice(len(sample), CALIBRATION_TEXTS, replace=False)
        sample = [sample[int(i)] for i in sorted(picked)]
    quantize_file(source, target, sample)
    return f"{SCHEME} (activation ranges from {len(sample)} training texts)"
