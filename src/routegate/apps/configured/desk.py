"""``ConfiguredDesk``, kept one release: a desk built from a configuration is :class:`routegate.apps.support.SupportAgent`
itself (``SupportAgent(config, desk_dir, db=<state>, data=<tables>, ...)``), the one desk, built-in or configured."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from routegate.apps.configured.config import DeskConfig
from routegate.apps.support.db import SupportDatabase
from routegate.apps.support.desk import SupportAgent
from routegate.embed import Encoder
from routegate.llm.protocol import ChatModel


class ConfiguredDesk(SupportAgent):
    """Deprecated: :class:`~routegate.apps.support.SupportAgent` with the arguments of its old constructor (``state``
    is ``db``). Making one warns; the name goes in the next release."""

    def __init__(
        self,
        config: DeskConfig,
        desk_dir: Path,
        *,
        data: SupportDatabase,
        state: SupportDatabase,
        encoder: Encoder,
        chat_model: ChatModel | None = None,
        **options: Any,
    ) -> None:
        warnings.warn(
            "ConfiguredDesk is deprecated: the one desk is routegate.apps.support.SupportAgent — "
            "SupportAgent(config, desk_dir, db=state, data=data, encoder=..., ...), or open_support_desk(settings, "
            "desk_dir=...). The name goes in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(config, desk_dir, db=state, data=data, encoder=encoder, chat_model=chat_model, **options)
