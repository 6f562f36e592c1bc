"""Prompt-injection suites: small tool worlds replayed with a scripted model that obeys every injection.

Two worlds ship — :data:`BANKING` (an account, transactions, files, payees, a password) and :data:`WORKSPACE`
(an inbox, a calendar, a contact directory) — each with user tasks, injections planted in the tool outputs the
tasks read, and checks of the world's final state. :func:`measure` runs a suite under a :class:`Defense` and
gives utility without injections, utility under attack and attack success; ``python bench/provenance.py``
prints the table for every defense. A suite of your own is a :class:`Suite` of your workers, tasks and
injections.
"""

from routegate.testing.injection._suite import (
    DEFENSES,
    NO_DEFENSE,
    RULES,
    RULES_RECOVER,
    Defense,
    Figures,
    Injection,
    ObedientRouter,
    PairResult,
    Suite,
    UserTask,
    measure,
    run_once,
)
from routegate.testing.injection.banking import BANKING
from routegate.testing.injection.workspace import WORKSPACE

SUITES = (BANKING, WORKSPACE)

__all__ = [
    "BANKING",
    "DEFENSES",
    "NO_DEFENSE",
    "RULES",
    "RULES_RECOVER",
    "SUITES",
    "WORKSPACE",
    "Defense",
    "Figures",
    "Injection",
    "ObedientRouter",
    "PairResult",
    "Suite",
    "UserTask",
    "measure",
    "run_once",
]
