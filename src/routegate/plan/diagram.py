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

from typing import TYPE_CHECKING, Any

from routegate.diagram import END_ID, START_ID, Diagram, DiagramEdge, DiagramNode, EdgeKind, NodeKind
from routegate.plan._compiled import BAND, PLAN, PROTO_ASYNC, PROTO_SYNC, START, STEP, Compiled
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

    add([START_ID], 0, "")
    for c in compiled:
        if band_id[c.index] is not None and not c.band_end:
            continue  # a band's members move together: its first member stands for it
        here = entry(c.index)
        after = c.band_end or c.index + 1
        if c.routes is not None:
            for index, _, why, _ in c.routes:
                add(here, index, why)
            add(here, after, "no route matched")
        elif c.by_field is not None:
            for value, index in c.by_map.items():
                add(here, index, f"{c.by_field} = {value!r}")
            add(here, after, f"{c.by_field} names no step")
        else:
            add(here, after, "")
        if c.rejoin >= 0:
            targets = [t for t, _, _, _ in c.routes] if c.routes is not None else list(c.by_map.values())
            for index in dict.fromkeys(targets):
                if index != c.rejoin:
                    add([ids[index]], c.rejoin, f"rejoin after {c.name}")

    position = {node: i for i, node in enumerate(ids)}
    position[END_ID] = count
    edges: list[DiagramEdge] = []
    for a, b in order:
        label = " or ".join(flows[a, b])
        loop = a != START_ID and position[b] <= position[a]
        if loop:
            label = f"{label} · {bound}" if label else bound
        edges.append(DiagramEdge(a, b, label, "flow", loop))
    for c in compiled:  # the inputs a step reads from elsewhere than the step before it
        reads = START_ID if c.source == START else ids[c.source_index] if c.source in (STEP, BAND) else None
        if reads is not None:
            edges.append(DiagramEdge(reads, ids[c.index], repr(c.step.context), "input"))
    return Diagram(tuple(nodes), tuple(edges), plan.name, plan.max_iterations)


__all__ = ["Diagram", "DiagramEdge", "DiagramNode", "EdgeKind", "NodeKind", "diagram_of"]
