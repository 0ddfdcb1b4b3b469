"""Small helpers the analyzers share: how times read, how findings name a process, and what
the recording knew about a process (its steps, its warmup, its compile options).

Not an analyzer (it is not in the registry).
"""

from __future__ import annotations

from diag.evidence.settings import settings_at
from diag.trace.run import Frame, RunData


def format_seconds(value: float) -> str:
    """Seconds as people read them: `2.45 s`, `136 ms`, `8.8 ms`."""
    if value >= 0.9995:
        return f"{value:.2f} s"
    return f"{value * 1000:.1f} ms" if value < 0.01 else f"{value * 1000:.0f} ms"


def process_tag(run: RunData, pid: int | None) -> str:
    """`rank1` (or `proc0`) when the run has several processes; empty when it has one."""
    return run.process_tag(pid)


def id_suffix(run: RunData, pid: int | None) -> str:
    """What every analyzer appends to a finding id: the process (if several) and the run (if
    not the compiled one), so ids stay unique and stable across re-analysis."""
    tag = process_tag(run, pid)
    return (f"@{tag}" if tag else "") + ("" if run.label == "compiled" else f"@{run.label}")


def process_lines(run: RunData, pid: int) -> list[str]:
    tag = process_tag(run, pid)
    return [f"process {tag} (pid {pid})"] if tag else []


def steps_known(run: RunData, pid: int) -> bool:
    """Whether diag knows this process's requests and steps (an adapter, --step-fn, diag.api)."""
    return any(request.pid == pid for request in run.requests)


def warmup_known(run: RunData, pid: int) -> bool:
    """Whether a warmup phase was identified in this process (a warmup request or compile)."""
    return any(r.pid == pid and r.phase == "warmup" for r in run.requests) or any(
        c.pid == pid and c.phase == "warmup" for c in run.compiles
    )


def compile_options(run: RunData, pid: int, frame: Frame | None) -> dict[str, object]:
    """The torch.compile options the program gave this frame (`compile_options` events), or {}."""
    for event in run.of("compile_options"):
        if event.pid == pid and Frame.from_event(event.data.get("frame")) == frame:
            return dict(event.data)
    return {}


def static_shapes(run: RunData, pid: int, frame: Frame | None, t: int) -> str | None:
    """What keeps every size of this frame static, when the trace says so: `torch.compile(
    dynamic=False)` (its `compile_options`) or `torch._dynamo.config.automatic_dynamic_shapes =
    False` (its `compile_settings` at `t`); None when neither is recorded. Under either, a second
    size never makes a dimension dynamic: each new size is a new cache entry."""
    if compile_options(run, pid, frame).get("dynamic") is False:
        return "torch.compile(dynamic=False)"
    automatic = settings_at(run, pid, t).get("automatic_dynamic_shapes")
    if automatic is not None and automatic.value is False:
        return "torch._dynamo.config.automatic_dynamic_shapes = False"
    return None


def static_undo(static: str) -> str:
    """What to drop so that a second size (or value) makes a dimension dynamic again."""
    if "dynamic=False" in static:
        return "dynamic=False"
    return "that setting (torch's default is True)"


def static_verb(static: str) -> str:
    """`was compiled with torch.compile(dynamic=False)`, `was compiled under <setting>`."""
    return "was compiled with" if "dynamic=False" in static else "was compiled under"


def process_static_shapes(run: RunData, pid: int) -> str | None:
    """`static_shapes` for the first compile of this process that the trace shows was made with
    sizes static, or None: what a process-wide finding (warmup coverage) quotes."""
    for item in run.compiles:
        if item.pid == pid:
            found = static_shapes(run, pid, item.frame, item.t)
            if found is not None:
                return found
    return None
