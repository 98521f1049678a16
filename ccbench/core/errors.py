"""The one exception type for expected errors: printed once by rank 0, no traceback."""

__all__ = ["CCBenchError", "UsageError"]


class CCBenchError(Exception):
    """An expected failure with a message meant for the user (exit code 1)."""

    exit_code = 1


class UsageError(CCBenchError):
    """Bad input from the user: a flag, a config key, a size, a name (exit code 2)."""

    exit_code = 2
