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
    result.outcome                      # the core Outcome: ok, stop_reason, phase, message

See docs/plan.md.
"""

from routegate.plan.checkpoint import Checkpoints, RunRecord
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
from routegate.plan.events import PlanEvent, PlanFinalEvent, StepEvent
from routegate.plan.plan import Plan
from routegate.plan.result import PlanResult
from routegate.plan.sentinels import (
    FromParallel,
    FromParallelAll,
    Sentinel,
    from_parallel,
    from_parallel_all,
    from_prev,
    from_start,
    from_step,
)
from routegate.plan.step import Step
from routegate.plan.store import Store
from routegate.plan.targets import ChatCompleter, StepContext, StepTarget, StructuredChatModel
from routegate.plan.when import Predicate, when

__all__ = [
    "ChatCompleter",
    "CheckpointConflictError",
    "CheckpointMismatchError",
    "Checkpoints",
    "DetourTrapWarning",
    "Envelope",
    "ErrorInfo",
    "FromParallel",
    "FromParallelAll",
    "Interrupt",
    "MaxIterationsExceeded",
    "Plan",
    "PlanCompileError",
    "PlanEvent",
    "PlanFinalEvent",
    "PlanResult",
    "PlanRuntimeError",
    "Predicate",
    "RunRecord",
    "Sentinel",
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
