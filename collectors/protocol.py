"""What a collector needs from the recording session, and nothing more.

Collectors are handed the session (collectors/session.py) when they install and keep it. They
name its type through this protocol instead of importing session.py, which installs them
(through collectors/registry.py): the collectors depend on the session's contract, the session
on the registry, and no import goes both ways.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from diag.trace.events import EventWriter

    from .hooks import Hooks


class Session(Protocol):
    """The recording session of one process, as the collectors see it."""

    pid: int
    rank: int | None
    #: The run's label (compiled, eager, ...): the folder the process's events go to.
    label: str
    #: The process's own folder under the run.
    proc_dir: Path
    writer: EventWriter
    #: DIAG_PROFILE and DIAG_STANCE as the session read them.
    profile_spec: str
    stance: str
    #: The session wrote its process_end (collectors/shutdown.py's exit paths look).
    ended: bool
    #: Per-step and per-call work is switched off (Session.pause): every such hook calls through.
    paused: bool
    #: Every hook diag runs inside the program runs through this (collectors/hooks.py).
    hooks: Hooks
    # Filled as the collectors install (collectors/registry.py says which keeps which).
    steps: Any
    compiles: Any
    cache: Any
    profiler: Any
    shapes: Any
    gc_pauses: Any
    #: The adapter driving the step boundaries, and its rank (announce_adapter).
    adapter: str | None
    adapter_rank: int

    @property
    def torch(self) -> Any:
        """The `torch` module (imported before the session started)."""

    def emit(self, event: str, **fields: Any) -> None:
        """Write one event to the process's event file."""

    def announce_adapter(self, name: str, rank: int = 3, stand_down: Any = None) -> None:
        """Record which adapter drives the step boundaries (a higher rank replaces a lower)."""

    def collector_error(self, where: str, exc: BaseException) -> None:
        """Record that the hook `where` failed; the program carries on."""

    def guarded(self, where: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` as the hook `where`: a failure is recorded, None returned."""

    def install(self, name: str, fn: Any, *args: Any) -> Any:
        """Install one collector; a failure records why and leaves the program untouched."""
