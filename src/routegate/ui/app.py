"""Streamlit entry point (``routegate ui`` runs ``streamlit run`` on this file): settings are read here, once."""

from __future__ import annotations

from routegate.settings import Settings
from routegate.ui._page import run_page

run_page(Settings())
