"""Settings: one pydantic-settings object, loaded once at the entry point and passed down.

Library code never reads ``os.environ``; the CLI and the server build :class:`Settings` and hand the parts to
the components they wire. Variables: the conventional ``OPENAI_*`` and ``DATABASE_URL``, and ``ROUTEGATE_*``
for everything else.
"""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("routegate", appauthor=False))


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ROUTEGATE_", extra="ignore", populate_by_name=True)

    # LLM (any OpenAI-compatible endpoint); no key means offline mode
    openai_api_key: SecretStr | None = Field(default=None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    openai_base_url: str | None = Field(default=None, validation_alias=AliasChoices("OPENAI_BASE_URL"))
    openai_model: str = Field(default="gpt-4.1-mini", validation_alias=AliasChoices("OPENAI_MODEL"))
    openai_timeout_seconds: float = Field(default=60.0, gt=0, validation_alias=AliasChoices("OPENAI_TIMEOUT_SECONDS"))
    openai_max_retries: int = Field(default=2, ge=0, le=10)

    # storage
    database_url: str | None = Field(default=None, validation_alias=AliasChoices("DATABASE_URL"))
    data_dir: Path = Field(default_factory=default_data_dir)

    # logging
    log_user_text: bool = False

    @property
    def llm_enabled(self) -> bool:
        return self.openai_api_key is not None and bool(self.openai_api_key.get_secret_value().strip())
