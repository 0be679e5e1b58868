"""The errors every layer raises, in one place so that traces, the engine and policies share them
without importing each other."""


class TraceError(ValueError):
    """Bad trace input: the message names the file, the row or field, and the reason.

    ``line`` and ``field`` (where known) let a reader that skips bad rows record them.
    """

    def __init__(self, message: str, *, line: int | None = None, field: str | None = None):
        super().__init__(message)
        self.line = line
        self.field = field


class ConfigError(ValueError):
    """A bad configuration value: the message names the key, the value and what is allowed."""


class OutputError(OSError):
    """An output could not be written (a read-only folder, a full disk, a file-size limit): the
    message names the file and the reason."""


class PolicyError(RuntimeError):
    """A policy returned a decision the engine cannot carry out, or ran away."""


class OracleError(PermissionError):
    """A non-oracle policy read ground truth."""


class UnfinishedJobsError(RuntimeError):
    """A run ended (no ``until``) with jobs that never finished; ``summary`` lists them."""

    def __init__(self, message: str, summary: dict | None = None):
        super().__init__(message)
        self.summary = summary
