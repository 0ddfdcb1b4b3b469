"""CUDA graphs recorded per compile (`cudagraph_record` events), read one way for the TUI's
Compiles detail and the report's "Inside the compiler" table."""

from __future__ import annotations

from dataclasses import dataclass, field

from diag.trace.run import RunData


@dataclass
class GraphCount:
    """The recordings of one compile in one process."""

    warmup: int = 0
    live: int = 0
    other: int = 0  # outside any request, or no position known
    capture_s: float = 0.0
    live_requests: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.warmup + self.live + self.other


def graphs_by_compile(run: RunData) -> dict[tuple[int, str], GraphCount]:
    """(pid, compile id) -> its recordings, in first-recording order."""
    counts: dict[tuple[int, str], GraphCount] = {}
    for event in run.of("cudagraph_record"):
        count = counts.setdefault((event.pid, str(event.data.get("compile_id"))), GraphCount())
        request_id = event.data.get("request_id")
        phase = event.data.get("phase")
        if not isinstance(request_id, str):
            count.other += 1
        elif phase == "warmup":
            count.warmup += 1
        else:
            count.live += 1
            if request_id not in count.live_requests:
                count.live_requests.append(request_id)
        seconds = event.data.get("duration_s")
        if isinstance(seconds, (int, float)):
            count.capture_s += float(seconds)
    return counts


def count_text(count: GraphCount) -> str:
    """`8 recorded: 0 in warmup, 8 live (r0, r2); capture 44 ms`."""
    text = f"{count.total} recorded: {count.warmup} in warmup, {count.live} live"
    if count.live_requests:
        more = " ..." if len(count.live_requests) > 6 else ""
        text += f" ({', '.join(count.live_requests[:6])}{more})"
    if count.other:
        text += f", {count.other} outside requests"
    return text + f"; capture {count.capture_s * 1000:.1f} ms"
