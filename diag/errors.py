"""The one error type the CLI turns into a single line on stderr and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


class DiagError(Exception):
    """A problem the user can fix; its message is printed as one line, never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
