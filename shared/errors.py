"""Root exceptions of trawl; each docstring is the default message."""

from __future__ import annotations


class TrawlError(Exception):
    """trawl failed."""

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.__doc__)


class ConfigError(TrawlError):
    """The configuration is invalid."""


class SourceError(TrawlError):
    """The source definition is invalid."""


class Poison(TrawlError):
    """The message can never be handled; it goes to the dead-letter queue at once."""


class Retry(TrawlError):
    """The message should be redelivered later."""

    def __init__(self, message: str | None = None, *, delay: float = 5.0) -> None:
        super().__init__(message)
        self.delay = delay
