"""The diagram of a plan: its compiled graph as a :class:`~routegate.diagram.Diagram` (``Plan.diagram()``).

One node per step (with what it runs when that is not a plain function: a nested plan, a runtime, an LLM; what it
writes; its phase), the input and the end; an edge per move a run can make after each step — each route with its
condition in words (a ``when`` predicate's description, ``routes_by``'s field and value), the fallback when no route
matched, the rejoin of an exclusive branch, the next step in declared order, a loop back with the run's bound —
and a dotted edge per input a step reads from elsewhere than the step before it (``from_start``, ``from_step``,
...). A parallel band is a group its neighbours reach member by member. The data and its drawing are
:mod:`routegate.diagram`'s, re-exported here.
"""

from __future__ import annotations

from collections import deque
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union, get_args, get_origin

from typing_extensions import is_typeddict

from routegate.diagram import END_ID, START_ID, Diagram, DiagramEdge, DiagramNode, EdgeKind, NodeKind
from routegate.plan._compiled import BAND, PLAN, PROTO_ASYNC, PROTO_SYNC, START, STEP, Compiled
from routegate.plan.step import _field_annotations
from routegate.plan.targets import ChatCompleterTarget, ChatModelTarget

if TYPE_CHECKING:
    from routegate.plan.plan import Plan


def diagram_of(plan: Plan[Any, Any]) -> Diagram:
    """The diagram of ``plan``'s compiled graph (no run drawn on it)."""
    compiled: tuple[Compiled, ...] = plan._compiled
    count = len(compiled)
    ids = [f"s{i}" for i in range(count)]
    band_id: list[str | None] = [None] * count
    for c in compiled:
        if c.band_end:
            for j in range(c.index, c.band_end):
                band_id[j] = f"band{c.index}"

    def entry(index: int) -> list[str]:
        """The nodes a move to step ``index`` reaches (every member of a band), or the end."""
        if index >= count:
            return [END_ID]
        end = compiled[index].band_end
        return ids[index:end] if end else [ids[index]]

    def note(c: Compiled) -> str:
        parts: list[str] = []
        fn_owner = getattr(c.fn, "__self__", None)
        if c.kind == PLAN:
            parts.append(f"nested plan, {len(c.target._compiled)} steps")
        elif c.kind in (PROTO_SYNC, PROTO_ASYNC):
            if isinstance(fn_owner, ChatModelTarget | ChatCompleterTarget):
                parts.append("LLM")
            elif isinstance(inner := getattr(c.target, "plan", None), type(plan)) and inner.runtime is not None:
                parts.append(f"runtime {inner.runtime.owner}")  # a runtime built as a plan: a RoutingAgent, ...
        if c.writes is not None:
            parts.append(f"writes {c.writes!r}")
        if c.phase != "step":
            parts.append(f"phase {c.phase}")
        return ", ".join(parts)

    nodes = [DiagramNode(START_ID, "input", "start")]
    nodes += [DiagramNode(ids[c.index], c.name, "step", note(c), band_id[c.index]) for c in compiled]
    nodes.append(DiagramNode(END_ID, "end", "end"))

    flows: dict[tuple[str, str], list[str]] = {}
    order: list[tuple[str, str]] = []
    bound = f"loop, max_iterations={plan.max_iterations}"

    def add(sources: list[str], target: int, label: str) -> None:
        for source in sources:
            for node in entry(target):
                key = (source, node)
                if key not in flows:
                    flows[key] = []
                    order.append(key)
                if label and label not in flows[key]:
                    flows[key].append(label)

    # the moves a run can make, walked as the interpreter moves: a state is a step and the routing step whose
    # exclusive branch it is in (its rejoin is next unless the step routes on), so that only reachable moves are drawn
    add([START_ID], 0, "")
    todo: deque[tuple[int, int]] = deque([(0, -1)])
    seen: set[tuple[int, int]] = set()
    while todo:
        state = todo.popleft()
        if state in seen or state[0] >= count:
            continue
        seen.add(state)
        for target, pending, label in _moves(compiled, *state):
            add(entry(state[0]), target, label)
            todo.append((target, pending))

    position = {node: i for i, node in enumerate(ids)}
    position[START_ID], position[END_ID] = -1, count
    order.sort(key=lambda edge: position[edge[0]])  # by the step they leave, then in the order they were found
    edges: list[DiagramEdge] = []
    for a, b in order:
        label = " or ".join(flows[a, b])
        loop = position[b] <= position[a]
        if loop:
            label = f"{label} · {bound}" if label else bound
        edges.append(DiagramEdge(a, b, label, "flow", loop))
    for c in compiled:  # the inputs a step reads from elsewhere than the step before it
        reads = START_ID if c.source == START else ids[c.source_index] if c.source in (STEP, BAND) else None
        if reads is not None:
            edges.append(DiagramEdge(reads, ids[c.index], repr(c.step.context), "input"))
    return Diagram(tuple(nodes), tuple(edges), plan.name, plan.max_iterations)


def _moves(compiled: tuple[Compiled, ...], at: int, pending: int) -> list[tuple[int, int, str]]:
    """The moves after step ``at`` (inside the exclusive branch of step ``pending``, or ``-1``): ``(the step it
    goes to, the routing step whose branch that is or -1, the words of the move)``; past the last step is the end."""
    c = compiled[at]
    if c.band_end:  # a band moves on together, in declared order
        return [(c.band_end, pending, "")]
    routed: list[tuple[int, str]] = []
    if c.routes is not None:
        routed = [(target, why) for target, _, why, _ in c.routes]
    elif c.by_field is not None:
        routed = [(target, f"{c.by_field} = {value!r}") for value, target in c.by_map.items()]
    moves = [(target, at if c.rejoin >= 0 and target != c.rejoin else -1, label) for target, label in routed]
    if c.by_field is not None and not _unrouted(c):
        return moves  # the output's field always names a step: the run always routes
    if pending >= 0:
        moves.append((compiled[pending].rejoin, -1, f"rejoin after {compiled[pending].name}"))
    elif c.routes is not None:
        moves.append((at + 1, -1, "no route matched"))
    elif c.by_field is not None:
        moves.append((at + 1, -1, f"{c.by_field} names no step"))
    else:
        moves.append((at + 1, -1, ""))
    return moves


def _unrouted(c: Compiled) -> bool:
    """Can ``routes_by``'s field of the step's validated output name no step (``None``, or absent)?"""
    output = c.step.output
    field = c.by_field or ""
    if is_typeddict(output) and field not in getattr(output, "__required_keys__", frozenset()):
        return True
    try:
        annotation = _field_annotations(output)[field]
    except Exception:  # compiled already: the field is there; anything else, draw the move rather than hide it
        return True
    return _admits_none(annotation)


def _admits_none(annotation: Any) -> bool:
    if annotation is None or annotation is type(None):
        return True
    origin = get_origin(annotation)
    if origin is Annotated:
        return _admits_none(get_args(annotation)[0])
    if origin is Literal:
        return None in get_args(annotation)
    if origin is Union or origin is UnionType:
        return any(_admits_none(arm) for arm in get_args(annotation))
    return False


__all__ = ["Diagram", "DiagramEdge", "DiagramNode", "EdgeKind", "NodeKind", "diagram_of"]
