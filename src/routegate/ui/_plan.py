"""The desk's plan in a turn's panel: the plan the server sends once (``GET /plan``), with the steps the turn ran
drawn on it, rendered by Streamlit's own Mermaid (``st.mermaid_chart``, shipped with Streamlit: nothing is fetched).

A turn's path is in its ``final`` event already: the trace entries of ``node == "plan"`` name the steps it ran,
in order; the last one says whether the plan's run ended well (``ok``) or stopped (its ``stop_reason``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from routegate._extras import needs

with needs("ui"):
    import streamlit as st

from routegate.diagram import SUCCESS, Diagram


def turn_path(final: Mapping[str, Any] | None) -> tuple[list[str], str | None]:
    """The steps the turn's plan ran and how its run ended (``"success"``, a stop reason, ``None``: no run)."""
    trace = final.get("trace") if final else None
    entries: Sequence[Any] = trace if isinstance(trace, list) else ()
    steps = [e for e in entries if isinstance(e, dict) and e.get("node") == "plan" and isinstance(e.get("target"), str)]
    if not steps:
        return [], None
    last = steps[-1]
    ended = SUCCESS if last.get("ok") else str(last.get("stop_reason") or "stopped")
    return [str(e["target"]) for e in steps], ended


def plan_chart(turn: Mapping[str, Any], data: Mapping[str, Any] | None) -> None:
    """Draw the desk's plan (``data``: ``GET /plan``'s body) with ``turn``'s path; nothing without both."""
    path, ended = turn_path(turn.get("final"))
    if not data or not path:
        return
    try:
        drawn = Diagram.from_dict(data).with_path(path, ended)
    except ValueError:  # a plan from another desk, or data of another shape: the rest of the panel stands
        return
    st.markdown("**Plan:** the steps this turn ran are highlighted")
    st.mermaid_chart(drawn.mermaid(), alt=f"the desk's plan; this turn ran {' → '.join(path)}")
