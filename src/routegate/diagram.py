"""A plan's diagram as plain data — nodes and labelled edges — drawn as Mermaid or Graphviz DOT text.

:meth:`routegate.plan.Plan.diagram` builds one (:mod:`routegate.plan.diagram`): an input node, one node per step,
an end node, and
the edges a run can take — each route with its condition in words (a ``when`` predicate's description, the
``routes_by`` field and value), the fallback when no route matched, the rejoin of an exclusive branch
(``after_branches=``), the next step in declared order — plus the dotted edges of the inputs a step reads from
elsewhere than the previous step (``from_start``, ``from_step(...)``, ...). Parallel bands are groups; an edge back
to an earlier step is a loop, labelled with the run's bound (``max_iterations``). Edges that join the same two
nodes are one edge whose label lists every way, so a run's path (step names) marks exactly one edge per move:
:meth:`Diagram.with_path` counts how often each node and edge was taken and where a run that did not succeed
stopped.

A :class:`Diagram` is frozen, JSON-serialisable (:meth:`Diagram.to_dict`, :meth:`Diagram.from_dict`) and renders
itself: :meth:`Diagram.mermaid` (docs, GitHub, Streamlit's ``st.mermaid_chart``) and :meth:`Diagram.dot`
(Graphviz). It knows nothing of the engine: a client that only has the data (the UI, from the server's
``GET /plan``) reads it back, draws a run's path on it and renders it with this module alone.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import TypeAdapter, ValidationError

NodeKind = Literal["start", "step", "end"]
EdgeKind = Literal["flow", "input"]

START_ID, END_ID = "start", "finish"  # ``end`` is a keyword of Mermaid
SUCCESS = "success"  # the stop reason of a run that succeeded (routegate.core.stop_reasons.SUCCESS)


@dataclass(frozen=True, slots=True)
class DiagramNode:
    """A node: the run's input (``kind="start"``), a step, or the plan's end.

    ``note`` says what kind of target a step runs when it is not a plain function (``nested plan, 3 steps``,
    ``LLM``, ``RoutingAgent``), what it writes and its phase; ``band`` names the parallel band the step belongs to.
    On a diagram with a path: ``visits`` (how often the path ran it) and ``stopped`` (the run stopped there)."""

    id: str
    label: str
    kind: NodeKind = "step"
    note: str = ""
    band: str | None = None
    visits: int = 0
    stopped: bool = False


@dataclass(frozen=True, slots=True)
class DiagramEdge:
    """An edge: ``kind="flow"`` a move a run can make (``label``: when, in words; empty for the next step in
    declared order), ``kind="input"`` a step reading the payload of a node that is not the step before it.
    ``loop``: it goes back to an earlier step (or the same one). ``taken``: how often a drawn path made it."""

    source: str
    target: str
    label: str = ""
    kind: EdgeKind = "flow"
    loop: bool = False
    taken: int = 0


@dataclass(frozen=True, slots=True)
class Diagram:
    """A plan's graph (see the module docstring): ``nodes`` and ``edges`` in a stable order, the plan's ``name`` and
    ``max_iterations`` (the bound of its loops), and the ``path`` drawn on it with how that run ended
    (``stop_reason``; ``None`` with an empty path: no run drawn)."""

    nodes: tuple[DiagramNode, ...]
    edges: tuple[DiagramEdge, ...]
    name: str | None = None
    max_iterations: int = 0
    path: tuple[str, ...] = ()
    stop_reason: str | None = None

    # -- a run on it -------------------------------------------------------------------------------------------
    def with_path(self, path: Iterable[str], stop_reason: str | None = None) -> Diagram:
        """This diagram with the run that executed the steps ``path`` (``result.path``, a checkpoint's path)
        drawn on it: each node's ``visits`` and each edge's ``taken`` count, the input's edge to the first step,
        and — when the run succeeded (``stop_reason`` ``None`` or ``"success"``) — the edge to the end; a run that
        stopped (any other stop reason) is ``stopped`` at its last step. A name that is not a step of the plan is a
        :class:`ValueError`."""
        names = tuple(path)
        ids = {node.label: node.id for node in self.nodes if node.kind == "step"}
        band_of = {node.id: node.band for node in self.nodes}
        unknown = [name for name in names if name not in ids]
        if unknown:
            raise ValueError(f"the path names {unknown[0]!r}, which is not a step of this plan; steps: {list(ids)}")
        units: list[list[str]] = []  # consecutive members of one parallel band are one move
        for name in names:
            node = ids[name]
            band = band_of[node]
            last = units[-1] if units else None
            if band is not None and last is not None and band_of[last[0]] == band and node not in last:
                last.append(node)
            else:
                units.append([node])
        index: dict[tuple[str, str], int] = {}
        for position, edge in enumerate(self.edges):
            if edge.kind == "flow":
                index.setdefault((edge.source, edge.target), position)
        taken: Counter[int] = Counter()
        visits: Counter[str] = Counter()
        before = [START_ID]
        for unit in units:
            _take(index, before, unit, taken)
            visits.update(unit)
            before = unit
        ended = stop_reason is None or stop_reason == SUCCESS
        stopped = None
        if units:
            visits[START_ID] = 1
            if ended:
                if _take(index, before, [END_ID], taken):
                    visits[END_ID] = 1
            else:
                stopped = units[-1][-1]
        nodes = tuple(
            dataclasses.replace(node, visits=visits[node.id], stopped=node.id == stopped) for node in self.nodes
        )
        edges = tuple(dataclasses.replace(edge, taken=taken[i]) for i, edge in enumerate(self.edges))
        return Diagram(nodes, edges, self.name, self.max_iterations, names, stop_reason if names else None)

    # -- as data ---------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The diagram as JSON-ready data (``from_dict`` reads it back)."""
        return {
            "name": self.name,
            "max_iterations": self.max_iterations,
            "path": list(self.path),
            "stop_reason": self.stop_reason,
            "nodes": [dataclasses.asdict(node) for node in self.nodes],
            "edges": [dataclasses.asdict(edge) for edge in self.edges],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagram:
        """A diagram from :meth:`to_dict`'s data (e.g. received over HTTP); data of another shape is a
        :class:`ValueError` saying what does not fit."""
        try:
            return _ADAPTER.validate_python(dict(data))
        except (ValidationError, TypeError) as exc:
            raise ValueError(f"not the data of a plan diagram: {exc}") from exc

    # -- drawn -----------------------------------------------------------------------------------------------
    def mermaid(self) -> str:
        """Mermaid flowchart text (top-down); a drawn path's edges are thick and orange, with ``×n`` when taken
        more than once, its nodes filled, the step a run stopped at red."""
        lines = ["flowchart TD"]
        for band, members in _grouped(self.nodes):
            if band is None:
                lines.append(f"    {_mermaid_node(members[0])}")
            else:
                lines.append(f'    subgraph {band} ["parallel"]')
                lines.append("        direction LR")
                lines.extend(f"        {_mermaid_node(node)}" for node in members)
                lines.append("    end")
        for edge in self.edges:
            arrow = "-.->" if edge.kind == "input" else "==>" if edge.taken else "-->"
            label = _label(edge)
            shown = f'|"{_mermaid_text(label)}"|' if label else ""
            lines.append(f"    {edge.source} {arrow}{shown} {edge.target}")
        visited = [node.id for node in self.nodes if node.visits and not node.stopped]
        stopped = [node.id for node in self.nodes if node.stopped]
        taken = [str(i) for i, edge in enumerate(self.edges) if edge.taken]
        if visited:
            lines.append("    classDef taken fill:#ffe8cc,stroke:#d9480f,stroke-width:2px")
            lines.append(f"    class {','.join(visited)} taken")
        if stopped:
            lines.append("    classDef stopped fill:#ffc9c9,stroke:#c92a2a,stroke-width:2px")
            lines.append(f"    class {','.join(stopped)} stopped")
        if taken:
            lines.append(f"    linkStyle {','.join(taken)} stroke:#d9480f,stroke-width:3px")
        return "\n".join(lines) + "\n"

    def dot(self) -> str:
        """Graphviz DOT text (``st.graphviz_chart``, ``dot -Tsvg``), styled as :meth:`mermaid`."""
        lines = [
            "digraph plan {",
            '    graph [rankdir=TB, fontname="sans-serif", fontsize=11];',
            '    node [shape=box, style="rounded", fontname="sans-serif", fontsize=11];',
            '    edge [fontname="sans-serif", fontsize=9];',
        ]
        for band, members in _grouped(self.nodes):
            if band is None:
                lines.append(f"    {_dot_node(members[0])}")
            else:
                lines.append(f'    subgraph cluster_{band} {{ label="parallel"; style=dashed; rank=same;')
                lines.extend(f"        {_dot_node(node)}" for node in members)
                lines.append("    }")
        for edge in self.edges:
            attrs = [f'label="{_dot_text(_label(edge))}"'] if _label(edge) else []
            if edge.kind == "input":
                attrs.append("style=dashed")
            if edge.taken:
                attrs.append('color="#d9480f", penwidth=2.5')
            lines.append(f"    {edge.source} -> {edge.target}" + (f" [{', '.join(attrs)}];" if attrs else ";"))
        lines.append("}")
        return "\n".join(lines) + "\n"


_ADAPTER: TypeAdapter[Diagram] = TypeAdapter(Diagram)


def _take(
    index: Mapping[tuple[str, str], int], sources: Sequence[str], targets: Sequence[str], taken: Counter[int]
) -> bool:
    """Count the moves from every node of ``sources`` to every node of ``targets`` that are edges; any found?"""
    found = False
    for a in sources:
        for b in targets:
            position = index.get((a, b))
            if position is not None:
                taken[position] += 1
                found = True
    return found


def _grouped(nodes: Sequence[DiagramNode]) -> list[tuple[str | None, list[DiagramNode]]]:
    """The nodes in order, each parallel band's members together (``(band, members)``; ``(None, [node])``)."""
    groups: list[tuple[str | None, list[DiagramNode]]] = []
    bands: dict[str, list[DiagramNode]] = {}
    for node in nodes:
        if node.band is None:
            groups.append((None, [node]))
        elif node.band in bands:
            bands[node.band].append(node)
        else:
            bands[node.band] = [node]
            groups.append((node.band, bands[node.band]))
    return groups


def _label(edge: DiagramEdge) -> str:
    if edge.taken > 1:
        return f"{edge.label} ×{edge.taken}".strip()
    return edge.label


_MERMAID_ESCAPES = str.maketrans(
    {"#": "#35;", '"': "#quot;", "<": "#lt;", ">": "#gt;", "&": "#amp;", "|": "#124;", "`": "#96;"}
)


def _printable(text: str) -> str:
    """``text`` with every character that is not printable (a control, a line or paragraph separator, a
    bidirectional override) written as its Python escape, so no label breaks a line or hides its text."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _mermaid_text(text: str) -> str:
    """``text`` safe inside a quoted Mermaid label: its markup characters as Mermaid's entity codes."""
    return _printable(text).translate(_MERMAID_ESCAPES)


def _mermaid_node(node: DiagramNode) -> str:
    text = _mermaid_text(node.label) + (f"<br/>{_mermaid_text(node.note)}" if node.note else "")
    if node.kind != "step":
        return f'{node.id}(["{text}"])'
    if node.note.startswith(("nested plan", "runtime")):
        return f'{node.id}[["{text}"]]'
    return f'{node.id}["{text}"]'


def _dot_text(text: str) -> str:
    """``text`` safe inside a quoted DOT string."""
    return _printable(text).replace("\\", "\\\\").replace('"', '\\"')


def _dot_node(node: DiagramNode) -> str:
    label = _dot_text(node.label) + (f"\\n{_dot_text(node.note)}" if node.note else "")
    attrs = [f'label="{label}"']
    if node.kind != "step":
        attrs.append("shape=oval")
    if node.stopped:
        attrs.append('style="rounded,filled", fillcolor="#ffc9c9", color="#c92a2a"')
    elif node.visits:
        attrs.append('style="rounded,filled", fillcolor="#ffe8cc", color="#d9480f"')
    return f"{node.id} [{', '.join(attrs)}];"


__all__ = ["END_ID", "START_ID", "Diagram", "DiagramEdge", "DiagramNode", "EdgeKind", "NodeKind"]
