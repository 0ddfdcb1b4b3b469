"""`diag record --torch-trace`: torch's own TORCH_TRACE file writer, kept from failing loudly.

diag sets TORCH_TRACE, so torch's structured-trace handler writes into the trace directory. A
logging handler that cannot write (a full disk) prints "--- Logging error ---" and a traceback
to the program's stderr for every record. Here its error hook stops that handler instead (torch
writes no more raw trace) and stops diag's recording in the process, with the one `diag:` line
the event writer prints. A TORCH_TRACE the user set themselves is left as torch has it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diag.trace.format import TORCH_TRACE_DIR

if TYPE_CHECKING:
    from .protocol import Session

TRACE_LOGGER = "torch.__trace"


def install(session: Session) -> None:
    folder = os.environ.get("TORCH_TRACE")
    expected = session.proc_dir.parent / TORCH_TRACE_DIR
    if not folder or Path(folder).resolve() != expected.resolve():
        return
    from torch._logging import _internal

    handler = getattr(_internal, "LOG_TRACE_HANDLER", None)
    if not isinstance(handler, logging.Handler):
        return

    def handle_error(record: logging.LogRecord) -> None:
        exc = sys.exc_info()[1] or OSError("unknown error")
        logging.getLogger(TRACE_LOGGER).removeHandler(handler)
        stream: Any = getattr(handler, "stream", None)
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.close()  # its unwritten buffer goes too: flushing it failed
            handler.stream = None  # type: ignore[attr-defined]
        session.writer.stop(exc, expected)

    handler.handleError = handle_error  # type: ignore[method-assign]
