"""routegate.plan: a declarative step graph with explicit, compile-time-validated conditional routing.

::

    from routegate.plan import Plan, Step, when

    plan = Plan(
        Step(search, output=Hits,
             routes={"apology": when.field("items").empty(), "write": when.field("items").not_empty()},
             after_branches="log_outcome"),
        Step(write),
        Step(apology),
        Step(log_outcome),
    )
    result = plan.run("query")          # or: await plan.arun("query"); async for event in plan.iter("query")
    result.path                         # ('search', 'apology', 'log_outcome') for empty hits
    result.output                       # the last step's payload ('result' is a core RunResult)
    result.outcome                      # the core Outcome: ok, stop_reason, phase, message

See docs/plan.md.
"""

from typing import TYPE_CHECKING

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.plan.checkpoint import Checkpoints
from routegate.plan.durable import interrupt, step_key
from routegate.plan.envelope import Envelope, ErrorInfo
from routegate.plan.errors import (
    CheckpointConflictError,
    CheckpointMismatchError,
    DetourTrapWarning,
    Interrupt,
    MaxIterationsExceeded,
    PlanCompileError,
    PlanRuntimeError,
)
from routegate.plan.events import StepEvent
from routegate.plan.plan import Plan
from routegate.plan.result import PlanResult
from routegate.plan.runtime import Runtime
from routegate.plan.sentinels import (
    from_parallel,
    from_parallel_all,
    from_prev,
    from_start,
    from_step,
)
from routegate.plan.step import Step
from routegate.plan.store import Store
from routegate.plan.targets import ChatCompleter, StepContext, StepTarget, StructuredChatModel
from routegate.plan.when import when

if TYPE_CHECKING:
    from routegate.plan.agent import RoutingAgent

__all__ = [
    "ChatCompleter",
    "CheckpointConflictError",
    "CheckpointMismatchError",
    "Checkpoints",
    "DetourTrapWarning",
    "Envelope",
    "ErrorInfo",
    "Interrupt",
    "MaxIterationsExceeded",
    "Plan",
    "PlanCompileError",
    "PlanResult",
    "PlanRuntimeError",
    "RoutingAgent",
    "Runtime",
    "Step",
    "StepContext",
    "StepEvent",
    "StepTarget",
    "Store",
    "StructuredChatModel",
    "from_parallel",
    "from_parallel_all",
    "from_prev",
    "from_start",
    "from_step",
    "interrupt",
    "step_key",
    "when",
]

_MOVED = {  # types a plan's author never names: the stream's union, sentinel and record classes
    "FromParallel": "sentinels",
    "FromParallelAll": "sentinels",
    "PlanEvent": "events",
    "Predicate": "when",
    "RunRecord": "checkpoint",
    "Sentinel": "sentinels",
}
_RENAMED = {  # every runtime's stream ends with the core's one final event
    "PlanFinalEvent": (
        "events:FinalEvent",
        "routegate.plan.PlanFinalEvent is no longer exported by routegate.plan; import FinalEvent from "
        "routegate.core (every runtime's final event, the same class). The old import works until the next release.",
    ),
}
__getattr__, __dir__ = _lazy_exports(__name__, {"RoutingAgent": "agent"}, __all__, renamed=_RENAMED, moved=_MOVED)
