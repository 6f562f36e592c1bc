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
from routegate.plan.envelope import Envelope, ErrorInfo, payload_text
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
    FromPrev,
    FromStart,
    FromStep,
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
from routegate.plan.when import FieldRef, Predicate, When, when

__all__ = [
    "ChatCompleter",
    "CheckpointConflictError",
    "CheckpointMismatchError",
    "Checkpoints",
    "DetourTrapWarning",
    "Envelope",
    "ErrorInfo",
    "FieldRef",
    "FromParallel",
    "FromParallelAll",
    "FromPrev",
    "FromStart",
    "FromStep",
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
    "When",
    "from_parallel",
    "from_parallel_all",
    "from_prev",
    "from_start",
    "from_step",
    "interrupt",
    "payload_text",
    "step_key",
    "when",
]
