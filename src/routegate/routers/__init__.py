"""routegate.routers: rules, semantic (embeddings + calibrated thresholds), cascade; fitting and evaluation.

The LLM router lives in :mod:`routegate.routers.llm`. The names below are imported on first use (:pep:`562`):
the keyword rules (:mod:`routegate.routers.rules`) and the LLM router come with ``pip install routegate``; the
semantic and cascade routers, fitting and evaluation need the ``embed`` extra (numpy, onnxruntime, scikit-learn),
and using one of them without it raises :class:`~routegate.errors.MissingExtraError` naming the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports

if TYPE_CHECKING:
    from routegate.routers._fit import FitConfig
    from routegate.routers.cascade import CascadeDecision, CascadeRouter
    from routegate.routers.data import LabelledExample
    from routegate.routers.evaluation import evaluate
    from routegate.routers.misroutes import MisrouteLog
    from routegate.routers.rules import KeywordRouter
    from routegate.routers.semantic import SemanticDecision, SemanticRouter

__all__ = [
    "CascadeDecision",
    "CascadeRouter",
    "FitConfig",
    "KeywordRouter",
    "LabelledExample",
    "MisrouteLog",
    "SemanticDecision",
    "SemanticRouter",
    "evaluate",
]

_WHERE = {
    "CascadeDecision": "cascade",
    "CascadeRouter": "cascade",
    "FitConfig": "_fit",
    "KeywordRouter": "rules",
    "LabelledExample": "data",
    "MisrouteLog": "misroutes",
    "SemanticDecision": "semantic",
    "SemanticRouter": "semantic",
    "evaluate": "evaluation",
}
_MOVED = {  # the routers' parts and the CLI's helpers, importable from their own modules
    "CascadeChoice": "cascade",
    "Misroute": "misroutes",
    "OOS_LABEL": "data",
    "SemanticOutcome": "semantic:Outcome",
    "load_examples": "data",
    "plot_report": "evaluation",
    "RuleStage": "cascade",
    "SemanticStage": "cascade",
    "RoutingQuery": "_stepped",
    "EvalReport": "evaluation",
    "Calibration": "_rule",
}
__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__, moved=_MOVED)
