"""Prompt-injection suites: small tool worlds replayed with a scripted model that obeys every injection.

Four worlds ship in :data:`SUITES` — banking (an account, transactions, files, payees, a password), workspace (an
inbox, a calendar, a contact directory), messaging (a team chat's channels, direct messages, web pages) and travel
(hotels, restaurants, reviews, the user's profile, e-mail and a calendar) — each with user tasks, injections
planted in the tool outputs the tasks read, and checks of the world's final state. :func:`measure` runs a suite
under a :class:`Defense` (one of :data:`DEFENSES`) through a :class:`~routegate.plan.ToolAgent` whose model is an
:class:`ObedientModel`, and gives utility without injections, utility under attack and attack success;
``python bench/provenance.py`` prints the table for every defense. A suite of your own is a :class:`Suite` of your
workers, tasks and injections.
"""

from routegate._lazy import lazy_exports as _lazy_exports
from routegate.testing.injection._suite import (
    DEFENSES,
    Defense,
    Figures,
    Injection,
    ObedientModel,
    ObedientRouter,
    Suite,
    UserTask,
    measure,
)
from routegate.testing.injection.banking import BANKING as _BANKING
from routegate.testing.injection.messaging import MESSAGING as _MESSAGING
from routegate.testing.injection.travel import TRAVEL as _TRAVEL
from routegate.testing.injection.workspace import WORKSPACE as _WORKSPACE

SUITES = (_BANKING, _WORKSPACE, _MESSAGING, _TRAVEL)

__all__ = [
    "DEFENSES",
    "SUITES",
    "Defense",
    "Figures",
    "Injection",
    "ObedientModel",
    "ObedientRouter",
    "Suite",
    "UserTask",
    "measure",
]

_MOVED = {  # the suites one by one, single defenses and single replays: reach them through SUITES and DEFENSES
    "BANKING": "banking",
    "NO_DEFENSE": "_suite",
    "PairResult": "_suite",
    "RULES": "_suite",
    "RULES_RECOVER": "_suite",
    "WORKSPACE": "workspace",
    "run_once": "_suite",
}
__getattr__, __dir__ = _lazy_exports(__name__, {}, __all__, moved=_MOVED)
