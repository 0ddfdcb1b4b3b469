"""Inside one compile, for the Compiles detail: its time by phase and cache hits
(`compile_timing`), the dims it made symbolic (`shape_symbol`) beside the values the frame's
sampled calls had there (`call_shapes`), the dims it baked in (`shape_specialization`), and
the CUDA graphs recorded for it (`cudagraph_record`).

Every string comes from the trace and is appended as literal Text, never parsed as markup.
"""

from __future__ import annotations

from typing import Any

from diag.evidence.shapes import sampled_dims, size_source
from diag.trace.cudagraph_counts import count_text, graphs_by_compile
from diag.trace.run import Compile, Event, RunData

from .cells import Text, seconds

_PHASES = (
    ("total_s", "total"),
    ("dynamo_s", "Dynamo"),
    ("aot_s", "AOTAutograd"),
    ("inductor_s", "Inductor"),
    ("codegen_s", "codegen"),
    ("triton_s", "Triton"),
    ("autotune_s", "autotuning"),
)
_FIRST_CALL = (("runtime_autotune_s", "autotuning"), ("cudagraphify_s", "CUDA-graph capture"))
_SHOWN = 12


def _same_compile(event: Event, item: Compile) -> bool:
    epoch = event.data.get("epoch")
    return (
        event.pid == item.pid
        and (epoch if isinstance(epoch, int) else 0) == item.epoch
        and str(event.data.get("compile_id")) == item.compile_id
    )


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _timing_lines(run: RunData, item: Compile) -> list[Text]:
    events = [e for e in run.of("compile_timing") if _same_compile(e, item)]
    if not events:
        return []
    out: list[Text] = []
    compiled = [e for e in events if not e.data.get("runtime")]
    phases = [
        f"{label} {seconds(sum(_number(e.data.get(key)) for e in compiled))}"
        for key, label in _PHASES
        if any(_number(e.data.get(key)) for e in compiled)
    ]
    first_call = [
        f"{label} {seconds(sum(_number(e.data.get(key)) for e in events))}"
        for key, label in _FIRST_CALL
        if any(_number(e.data.get(key)) for e in events)
    ]
    if phases or first_call:
        line = Text("compile time by phase: ", style="bold")
        line.append(", ".join(phases) or "none logged")
        if first_call:
            line.append("; at the first call: " + ", ".join(first_call))
        out.append(line)
    caches: list[str] = []
    for event in compiled:
        for name, counts in (event.data.get("caches") or {}).items():
            if isinstance(counts, dict):
                caches.append(
                    f"{str(name).replace('_', ' ')} {int(_number(counts.get('hit')))} hit(s), "
                    f"{int(_number(counts.get('miss')))} miss(es)"
                )
    if caches:
        out.append(Text("caches: ", style="bold").append("; ".join(caches)))
    for event in events:
        reason = event.data.get("cudagraph_skip_reason")
        if isinstance(reason, str) and reason:
            out.append(Text("CUDA graphs skipped: ", style="bold").append(reason[:300]))
    return out


def _values(values: set[int] | None) -> str:
    if not values:
        return "not sampled"
    shown = sorted(values)
    return ", ".join(map(str, shown[:6])) + (" ..." if len(shown) > 6 else "")


def _dims_lines(run: RunData, item: Compile) -> list[Text]:
    symbols = [e for e in run.of("shape_symbol") if _same_compile(e, item)]
    specialised = [e for e in run.of("shape_specialization") if _same_compile(e, item)]
    if not symbols and not specialised:
        return []
    sampled = sampled_dims(run).get((item.pid, item.frame), {}) if item.frame else {}
    out: list[Text] = []
    if symbols:
        out.append(Text(f"dims made symbolic ({len(symbols)}):", style="bold"))
    for event in symbols[:_SHOWN]:
        source = str(event.data.get("source"))
        key = size_source(source)
        line = Text(f"  {event.data.get('symbol')} = {event.data.get('value')}  ")
        line.append(source)
        line.append(f"  calls: {_values(sampled.get(key)) if key else 'not an argument'}")
        if event.data.get("user_location"):
            line.append(f"  at {event.data.get('user_location')}", style="dim")
        out.append(line)
    if len(symbols) > _SHOWN:
        out.append(Text(f"  ... and {len(symbols) - _SHOWN} more", style="dim"))
    if specialised:
        out.append(Text(f"dims baked in ({len(specialised)}):", style="bold"))
    for event in specialised[:_SHOWN]:
        sources = [str(s) for s in event.data.get("sources") or []]
        line = Text(f"  {event.data.get('symbol')} -> {event.data.get('value')}  ")
        line.append(", ".join(sources[:3]))
        values = [sampled.get(key) for s in sources if (key := size_source(s)) is not None]
        if values:
            line.append(f"  calls: {_values(values[0])}")
        if event.data.get("user_location"):
            line.append(f"  at {event.data.get('user_location')}", style="dim")
        out.append(line)
    return out


def compile_internals(run: RunData | None, item: Compile) -> list[Text]:
    """The detail lines for one compile's time, caches and dims (none when not recorded)."""
    if run is None:
        return []
    return [*_timing_lines(run, item), *_graph_lines(run, item), *_dims_lines(run, item)]


def _graph_lines(run: RunData, item: Compile) -> list[Text]:
    count = graphs_by_compile(run).get((item.pid, item.compile_id))
    if count is None:
        return []
    line = Text("CUDA graphs: ", style="bold").append(count_text(count))
    if count.live:
        line.append("  recorded in live traffic: see the cudagraphs finding", style="red")
    return [line]
