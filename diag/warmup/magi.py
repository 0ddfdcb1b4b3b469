"""What MagiCompiler's targets need of a warmup (docs/WARMUP.md, rule 8).

`magi_compile` compiles a target once, at its first call, with the dims its `dynamic_arg_dims`
declares marked dynamic, and runs the captured bytecode on every later call without checking
Dynamo's guards (MAGI_COMPILE mode; TORCH_COMPILE mode hands the same marks to torch.compile,
whose guards then apply). So a target needs one warmup request, not two: a declared dim needs
no second size to become dynamic. What warmup can still move out of traffic is a
`compile_sizes` entry, which magi compiles on its fast path at first use
(`magi_runtime_compile`): a request of the live shape that brought it. An undeclared dim that
varies compiles nothing on the fast path: the call runs code specialised for other values
(magi-compile's guard-bypass), which the program fixes by declaring the dim, not by warmup.

Read from the recorder's `magi_state` (and `magi_compile`) events: the target's code location,
its declared dims and magi's config.
"""

from __future__ import annotations

from dataclasses import dataclass

from diag.trace.run import Event, Frame, RunData


@dataclass(frozen=True)
class MagiTarget:
    """One magi_compile target as the recording declares it."""

    name: str
    dims: tuple[tuple[str, int], ...]  # dynamic_arg_dims, in declared order
    mode: str | None  # MAGI_COMPILE or TORCH_COMPILE (magi's compile_mode)
    compile_sizes: tuple[int, ...]

    def declared(self) -> str:
        return ", ".join(f"{arg}[{dim}]" for arg, dim in self.dims) or "none"

    def phrase(self) -> str:
        """Why the frame needs no second size, in one sentence."""
        how = (
            "torch.compile with those dims marked dynamic"
            if self.mode == "TORCH_COMPILE"
            else "compiled once with them dynamic; its fast path checks no guard afterwards"
        )
        return (
            f"magi_compile target, dynamic_arg_dims {self.declared()} ({how}): a declared dim "
            "needs no second size, so it needs only the first request"
            + (
                f"; compile_sizes {list(self.compile_sizes)} compile on the fast path at first use"
                if self.compile_sizes
                else ""
            )
        )


def _dims(value: object) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        return ()
    return tuple(
        (str(arg), int(dim))
        for arg, dim in value.items()
        if isinstance(dim, int) and not isinstance(dim, bool)
    )


def magi_targets(run: RunData) -> dict[tuple[str, int], MagiTarget]:
    """(file, line) of each target's code -> what it declares. `magi_state` (a target's first
    call) carries the config; a `magi_compile` decoration alone gives the dims."""
    found: dict[tuple[str, int], MagiTarget] = {}
    for kind in ("magi_compile", "magi_state"):
        for event in run.of(kind):
            frame = Frame.from_event(event.data.get("target"))
            if frame is None or frame.file is None or frame.line is None:
                continue
            config = event.data.get("config")
            config = config if isinstance(config, dict) else {}
            sizes = config.get("compile_sizes")
            mode = config.get("compile_mode")
            known = found.get((frame.file, frame.line))
            found[(frame.file, frame.line)] = MagiTarget(
                name=str(event.data.get("name") or frame.name),
                dims=_dims(event.data.get("dynamic_arg_dims")) or (known.dims if known else ()),
                mode=str(mode) if isinstance(mode, str) else (known.mode if known else None),
                compile_sizes=tuple(int(s) for s in sizes if isinstance(s, int))
                if isinstance(sizes, list)
                else (known.compile_sizes if known else ()),
            )
    return found


def target_of(targets: dict[tuple[str, int], MagiTarget], frame: Frame | None) -> MagiTarget | None:
    if frame is None or frame.file is None or frame.line is None:
        return None
    return targets.get((frame.file, frame.line))


def runtime_compiles(run: RunData) -> list[Event]:
    """Fast-path calls that compiled (a compile_sizes entry at first use) inside a live request."""
    return [
        e
        for e in run.of("magi_runtime_compile")
        if e.position[0] == "live" and e.position[1] is not None
    ]


def bypass_notes(run: RunData) -> list[str]:
    """Targets whose fast path ran calls that failed the guards captured at compile: a warmup
    cannot help (magi compiles a target once), the program must declare the dim or keep the
    value out of the target. One note per target, with its first failed guard."""
    failed: dict[str, list[Event]] = {}
    for event in run.of("magi_guard_check"):
        if event.data.get("ok") is False:
            failed.setdefault(str(event.data.get("name") or "?"), []).append(event)
    notes = []
    for name, events in failed.items():
        reason = str(events[0].data.get("reason") or "").split("\n", 1)[0].split("#", 1)[0]
        notes.append(
            f"{name}: magi's fast path ran {len(events)} sampled call(s) that fail the guards "
            f"captured at its compile (first: {reason.strip() or 'not recorded'}); they ran code "
            "specialised for other values, and no warmup prevents that, since magi compiles a "
            "target once: see magi-compile's guard-bypass finding (the fix is in the program: "
            "declare the dim in dynamic_arg_dims, or keep the value out of the target)"
        )
    return notes
