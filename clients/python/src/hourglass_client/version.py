"""The SDK's release: the same number as the server's `hourglass.version` (a test holds them equal), kept
here because the SDK is packaged on its own; its pyproject.toml reads it."""

__version__ = "1.3.0"
