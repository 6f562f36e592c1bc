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
    from routegate.routers._rule import Calibration
    from routegate.routers._stepped import RoutingQuery
    from routegate.routers.cascade import CascadeChoice, CascadeDecision, CascadeRouter, RuleStage, SemanticStage
    from routegate.routers.data import OOS_LABEL, LabelledExample, load_examples
    from routegate.routers.evaluation import EvalReport, evaluate, plot_report
    from routegate.routers.misroutes import Misroute, MisrouteLog
    from routegate.routers.rules import KeywordRouter
    from routegate.routers.semantic import Outcome as SemanticOutcome
    from routegate.routers.semantic import SemanticDecision, SemanticRouter

__all__ = [
    "OOS_LABEL",
    "Calibration",
    "CascadeChoice",
    "CascadeDecision",
    "CascadeRouter",
    "EvalReport",
    "FitConfig",
    "KeywordRouter",
    "LabelledExample",
    "Misroute",
    "MisrouteLog",
    "RoutingQuery",
    "RuleStage",
    "SemanticDecision",
    "SemanticOutcome",
    "SemanticRouter",
    "SemanticStage",
    "evaluate",
    "load_examples",
    "plot_report",
]

_WHERE = {
    "OOS_LABEL": "data",
    "Calibration": "_rule",
    "CascadeChoice": "cascade",
    "CascadeDecision": "cascade",
    "CascadeRouter": "cascade",
    "EvalReport": "evaluation",
    "FitConfig": "_fit",
    "KeywordRouter": "rules",
    "LabelledExample": "data",
    "Misroute": "misroutes",
    "MisrouteLog": "misroutes",
    "RoutingQuery": "_stepped",
    "RuleStage": "cascade",
    "SemanticDecision": "semantic",
    "SemanticOutcome": "semantic:Outcome",
    "SemanticRouter": "semantic",
    "SemanticStage": "cascade",
    "evaluate": "evaluation",
    "load_examples": "data",
    "plot_report": "evaluation",
}

__getattr__, __dir__ = _lazy_exports(__name__, _WHERE, __all__)
