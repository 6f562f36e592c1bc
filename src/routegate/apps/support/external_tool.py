"""The external tool (mock API): ``type`` (weather | crypto) + ``query`` → ``{result, source: "mock"}``.

Hard-coded answers only (the spec's exact strings); no network. A query the mock has no answer for — another
coin, a stock, the news — returns ``None`` (empty), and the graph falls back to the Respond node.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from routegate.apps.support.data import CRYPTO_ANSWER, WEATHER_ANSWER

ExternalType = Literal["weather", "crypto"]
EXTERNAL_TYPES: Final[tuple[ExternalType, ...]] = ("weather", "crypto")

_WEATHER = re.compile(
    r"\b(weather|temperature|temp|forecast|rain(?:ing|y)?|sunny|snow(?:ing)?|wind(?:y)?|humid(?:ity)?|"
    r"degrees|celsius|fahrenheit|hot|cold|umbrella|climate today)\b",
    re.IGNORECASE,
)
_CRYPTO_ANY = re.compile(
    r"\b(crypto\w*|bitcoin|btc|ethereum|eth|ether|dogecoin|doge|solana|sol|litecoin|ltc|xrp|ripple|coin|"
    r"tokens?)\b",
    re.IGNORECASE,
)
_BITCOIN = re.compile(r"\b(bitcoin|btc|bitcoins|bit coin|bitcoing|bitcion)\b", re.IGNORECASE)
_OTHER_COIN = re.compile(
    r"\b(ethereum|eth|ether|dogecoin|doge|solana|litecoin|ltc|xrp|ripple|cardano|ada)\b", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class ExternalResult:
    result: str
    source: Literal["mock"] = "mock"

    def to_dict(self) -> dict[str, Any]:
        return {"result": self.result, "source": self.source}


def detect_type(query: str) -> ExternalType | None:
    """Which mock API a message is for, or ``None`` when it is for neither."""
    if _BITCOIN.search(query) or _CRYPTO_ANY.search(query):
        return "crypto"
    if _WEATHER.search(query):
        return "weather"
    return None


class ExternalTool:
    """The mock external API."""

    name = "external"

    def call(self, type: ExternalType, query: str) -> ExternalResult | None:
        """The mock answer for ``type``, or ``None`` (empty) for a query the mock does not cover."""
        if type == "weather":
            return ExternalResult(WEATHER_ANSWER)
        # crypto: the mock only knows Bitcoin ("crypto prices" gets it too); another named coin gets nothing
        if _BITCOIN.search(query) or not _OTHER_COIN.search(query):
            return ExternalResult(CRYPTO_ANSWER)
        return None
