"""routegate.routers: rules, semantic (embeddings + calibrated thresholds), cascade; fitting and evaluation.

The LLM router lives in :mod:`routegate.routers.llm` (imported on demand: it needs the LLM stack).
"""

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
