"""routegate.routers: rules, semantic (embeddings + calibrated thresholds), cascade; fitting and evaluation.

The LLM router lives in :mod:`routegate.routers.llm` (imported on demand: it needs the LLM stack).
"""

from routegate.routers._fit import FitConfig
from routegate.routers._rule import Calibration
from routegate.routers.calibration import ClarifyFit, ThresholdFit, fit_clarify_margin, fit_threshold
from routegate.routers.cascade import CascadeDecision, CascadeRouter
from routegate.routers.data import OOS_LABEL, LabelledExample, load_examples
from routegate.routers.evaluation import EvalReport, evaluate, plot_report
from routegate.routers.misroutes import Misroute, MisrouteLog, misroutes_of
from routegate.routers.rules import KeywordRouter
from routegate.routers.semantic import Outcome, SemanticDecision, SemanticRouter

__all__ = [
    "OOS_LABEL",
    "Calibration",
    "CascadeDecision",
    "CascadeRouter",
    "ClarifyFit",
    "EvalReport",
    "FitConfig",
    "KeywordRouter",
    "LabelledExample",
    "Misroute",
    "MisrouteLog",
    "Outcome",
    "SemanticDecision",
    "SemanticRouter",
    "ThresholdFit",
    "evaluate",
    "fit_clarify_margin",
    "fit_threshold",
    "load_examples",
    "misroutes_of",
    "plot_report",
]
