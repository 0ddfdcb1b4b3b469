"""The one error type the CLI turns into a single line on stderr and an exit code."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: diag itself failed (a bug): one line on stderr, and never 1, which `diag check` uses for a
#: violated policy, so that CI cannot read a crash of diag as a verdict.
EXIT_INTERNAL = 3


class DiagError(Exception):
    """A problem the user can fix; its message is printed as one line, never a traceback."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
