"""routegate.embed: text encoders (embedded offline default; others behind the same protocol)."""

from routegate.embed.protocol import Encoder, Vectors

__all__ = ["Encoder", "Vectors"]
