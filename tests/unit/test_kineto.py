"""diag's Kineto reader: real traces of every format it meets, corrupt input, and HTA's view."""

from __future__ import annotations

import collections
import functools
import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

import diag.trace.kineto as kineto
from diag.errors import DiagError
from diag.trace.kineto import KinetoTrace, read_kineto
from tests.bench_scripts import load_bench

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO / "tests" / "data" / "shared" / "kineto"
H200 = REPO / "tests" / "data" / "h200"
ROUTING = H200 / "record-wan-routing" / "runs"
OFFLOAD = H200 / "record-wan-offload-unwarmed" / "runs"


def _shared_files() -> list[Any]:
    files = sorted(SHARED.glob("*.json.gz"))
    if not files:
        reason = f"{SHARED.parent} is absent (a CI clone without shared/)"
        return [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-shared-data")]
    return [pytest.param(path, id=path.name.removesuffix(".json.gz")) for path in files]


@functools.cache
def _parse(path: Path) -> KinetoTrace:
    return read_kineto(path)


@functools.cache
def _raw(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rb") as handle:
        events: list[dict[str, Any]] = json.loads(handle.read())["traceEvents"]
    return events


def _kernels(trace: KinetoTrace) -> list[kineto.Activity]:
    return [a for a in trace.activities if a.kind == "kernel"]


@pytest.mark.parametrize("path", _shared_files())
def test_shared_traces(path: Path) -> None:
    trace = _parse(path)
    name = path.name
    assert trace.event_count == len(_raw(path))
    assert [a.ts for a in trace.activities] == sorted(a.ts for a in trace.activities)
    assert [o.ts for o in trace.cpu_ops] == sorted(o.ts for o in trace.cpu_ops)
    assert trace.start_ts <= trace.end_ts
    if name.startswith("cpu_"):
        assert trace.platform == "cpu"
        assert trace.activities == []
        assert len(trace.cpu_ops) > 0
        return
    kernels = _kernels(trace)
    assert kernels
    assert all(k.launcher and k.launch_ts <= k.ts for k in kernels), "a kernel lost its launch"
    assert all(k.op for k in kernels), "a kernel has no CPU op"
    launchers = collections.Counter(k.launcher for k in kernels)
    if name.startswith("h200_"):
        assert trace.platform == "cuda"
        assert trace.base_ns > 0
    if "compiled" in name:
        assert launchers["cuLaunchKernelEx"] > 0
        assert launchers["cuLaunchKernel"] > 0  # Triton
    if "offload" in name:
        copies = [a for a in trace.activities if a.kind == "memcpy" and a.direction == "HtoD"]
        assert copies and all(c.bytes > 0 for c in copies)
        assert {c.op for c in copies} == {"aten::copy_"}
        assert {s.kind for s in trace.syncs} >= {"stream"}
    if "cudagraphs" in name:
        replays = collections.Counter(
            k.correlation for k in kernels if k.launcher == "cudaGraphLaunch"
        )
        assert replays and max(replays.values()) > 1
    if "mi250" in name:
        assert trace.platform == "rocm"
        assert all(a.launcher.startswith("hip") for a in trace.activities)
        assert any(a.kind == "memcpy" and a.bytes > 0 for a in trace.activities)
    if "2021" in name:
        _check_2021_attribution(path, trace)


def _check_2021_attribution(path: Path, trace: KinetoTrace) -> None:
    """Each kernel's op is the Operator whose External id its launch names as `external id`."""
    raw = _raw(path)
    operators = {e["args"]["External id"]: e["name"] for e in raw if e.get("cat") == "Operator"}
    by_correlation = {
        e["args"]["correlation"]: operators[e["args"]["external id"]]
        for e in raw
        if e.get("cat") == "Runtime" and e["args"].get("external id") in operators
    }
    kernels = _kernels(trace)
    assert sum(by_correlation[k.correlation] == k.op for k in kernels) == len(kernels)
    assert isinstance(raw[0]["tid"], str) or any(isinstance(e["tid"], str) for e in raw)
    assert all(k.stream == 7 for k in kernels)  # from args.stream; tids are "stream 7"


def test_repo_h200_traces_match_every_launch() -> None:
    paths = sorted(H200.glob("*.json.gz"))
    assert len(paths) >= 6
    for path in paths:
        trace = _parse(path)
        assert trace.platform == "cuda"
        assert all(a.launcher for a in trace.activities), path.name
        assert all(a.op for a in _kernels(trace)), path.name


@pytest.mark.parametrize(
    ("label", "kernel"),
    [("compiled", "triton_red_fused_"), ("eager", "_rms_norm_fwd_kernel")],
)
def test_regions_attribute_the_rmsnorm_kernels(label: str, kernel: str) -> None:
    """diag.region annotations survive compile: the RMSNorm kernels land in the block regions."""
    path = next((ROUTING / label).glob("pid*/kineto/r0-s2-steady.json.gz"))
    trace = _parse(path)
    rms = [k for k in _kernels(trace) if k.name.startswith(kernel) and "rsqrt" in k.name] or [
        k for k in _kernels(trace) if k.name == kernel
    ]
    assert rms
    assert all(k.region.startswith("wan_block_forward#") for k in rms)
    assert all(k.annotation.startswith(kineto.REGION_PREFIX) for k in rms)
    regions = {k.region for k in _kernels(trace) if k.region}
    assert "wan_block_forward#0" in regions and len(regions) == 24  # 12 blocks x 2 CFG passes
    ops_in_regions = [o for o in trace.cpu_ops if o.region]
    assert ops_in_regions and all(o.depth >= 0 for o in trace.cpu_ops)
    assert {o.depth for o in trace.cpu_ops} >= {0, 1, 2}


def test_record_windows_parse() -> None:
    paths = sorted(OFFLOAD.glob("*/pid*/kineto/*.json.gz")) + sorted(
        ROUTING.glob("*/pid*/kineto/*.json.gz")
    )
    assert len(paths) == 12
    for path in paths:
        trace = _parse(path)
        assert all(a.launcher for a in trace.activities), path
        assert any(a.region for a in trace.activities), path
    offload = _parse(next(OFFLOAD.glob("compiled/pid*/kineto/r0-s2-steady.json.gz")))
    copies = [a for a in offload.activities if a.direction == "HtoD"]
    assert sum(c.bytes for c in copies) > 100e6
    assert any(s.kind == "stream" for s in offload.syncs)


def test_unix_ns_uses_base_time() -> None:
    trace = _parse(H200 / "wan-compiled.json.gz")
    first = trace.activities[0]
    assert trace.unix_ns(first.ts) == trace.base_ns + round(first.ts * 1000)
    assert 1.7e18 < trace.unix_ns(first.ts) < 2.0e18


@pytest.mark.filterwarnings("ignore:The inplace keyword")  # HTA's own use of pandas
def test_agrees_with_hta(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernel count and total kernel time match HTA's own parse of the same file."""
    pytest.importorskip("hta")
    from hta.common.trace_parser import parse_trace_dataframe
    from hta.configs.env_options import HTAEnvOptions
    from hta.configs.parser_config import ParserConfig

    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    options = HTAEnvOptions.instance()
    before = options.disable_ns_rounding()
    options.set_disable_ns_rounding(True)
    try:
        path = H200 / "wan-compiled.json.gz"
        _, frame, symbols = parse_trace_dataframe(str(path), ParserConfig.get_default_cfg())
    finally:
        options.set_disable_ns_rounding(before)
    kernel_cat = symbols.get_sym_id_map()["kernel"]
    hta_kernels = frame[frame["cat"] == kernel_cat]
    ours = _kernels(_parse(path))
    assert len(ours) == len(hta_kernels)
    assert sum(k.dur for k in ours) == pytest.approx(float(hta_kernels["dur"].sum()), rel=1e-9)


# --- odd and bad input ---------------------------------------------------------------------


def _write(path: Path, document: object) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_odd_events_are_skipped_or_normalised(tmp_path: Path) -> None:
    events = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": "1", "args": {"name": "x"}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": "11", "ts": 10, "dur": 5},
        {"ph": "B", "cat": "cpu_op", "name": "begin-end", "pid": 1, "tid": 11, "ts": 11},
        {"ph": "X", "cat": "cpu_op", "name": "no-ts", "pid": 1, "tid": 11},
        {"ph": "X", "cat": "mystery", "name": "?", "ts": 1, "dur": 1},
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 11, "ts": 12, "args": {"Bytes": 4}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 11,
         "ts": 11, "dur": 2, "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": "stream 7", "ts": 20, "dur": 3,
         "args": {"correlation": 5}},
        {"ph": "X", "cat": "kernel", "name": "orphan", "pid": 0, "tid": 7, "ts": 30, "dur": 1},
        {"ph": "f", "id": 5, "pid": 0, "tid": 7, "ts": 20, "cat": "ac2g", "name": "ac2g"},
    ]  # fmt: skip
    trace = read_kineto(_write(tmp_path / "odd.json", {"traceEvents": events}))
    assert [o.name for o in trace.cpu_ops] == ["aten::mm"]
    assert trace.cpu_ops[0].tid == 11
    kernel, orphan = trace.activities
    assert (kernel.launcher, kernel.op, kernel.stream, kernel.device) == (
        "cudaLaunchKernel", "aten::mm", 7, 0
    )  # fmt: skip
    assert (orphan.launcher, orphan.launch_ts, orphan.op, orphan.correlation) == ("", -1.0, "", 0)
    assert trace.base_ns == 0 and trace.event_count == len(events)


def test_syncs_from_calls_and_cuda_sync_activities(tmp_path: Path) -> None:
    """A cuda_sync activity that repeats a runtime sync call (same correlation) counts once."""
    events = [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "pid": 1, "tid": 3,
         "ts": 10, "dur": 50, "args": {"correlation": 11}},
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 0, "tid": 7, "ts": 11,
         "dur": 48, "args": {"correlation": 11, "cuda_sync_kind": "Stream Sync"}},
        {"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 70,
         "dur": 5, "args": {"correlation": 12}},
        {"ph": "X", "cat": "cuda_sync", "name": "Stream Wait Event", "pid": 0, "tid": 7,
         "ts": 80, "dur": 5, "args": {"correlation": 13}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 3,
         "ts": 90, "dur": 9, "args": {"correlation": 14}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "pid": 1, "tid": 3,
         "ts": 100, "dur": 1, "args": {"correlation": 15}},
    ]  # fmt: skip
    trace = read_kineto(_write(tmp_path / "t.json", {"traceEvents": events}))
    assert [(s.name, s.kind, s.tid) for s in trace.syncs] == [
        ("cudaStreamSynchronize", "stream", 3),
        ("Event Sync", "event", 7),
        ("cudaDeviceSynchronize", "device", 3),
    ]
    assert trace.platform == "cuda"


@pytest.mark.parametrize(
    ("op_cat", "runtime_cat", "kernel_cat", "key"),
    [
        ("Operator", "Runtime", "Kernel", "external id"),  # 2021
        ("cpu_op", "cuda_runtime", "kernel", "External id"),
    ],
)
def test_external_id_links_the_op_even_across_threads(
    tmp_path: Path, op_cat: str, runtime_cat: str, kernel_cat: str, key: str
) -> None:
    """The launch runs on another thread than its op: only the External id can join them."""
    events = [
        {"ph": "X", "cat": op_cat, "name": "aten::conv", "pid": 1, "tid": "100", "ts": 0,
         "dur": 10, "args": {"External id": 42}},
        {"ph": "X", "cat": op_cat, "name": "aten::other", "pid": 1, "tid": "200", "ts": 0,
         "dur": 10, "args": {"External id": 43}},
        {"ph": "X", "cat": runtime_cat, "name": "cudaLaunchKernel", "pid": 1, "tid": "200",
         "ts": 5, "dur": 1, "args": {"correlation": 9, key: 42}},
        {"ph": "X", "cat": kernel_cat, "name": "conv_kernel", "pid": 0, "tid": "stream 7",
         "ts": 20, "dur": 3, "args": {"correlation": 9, key: 42}},
    ]  # fmt: skip
    (kernel,) = read_kineto(_write(tmp_path / "t.json", {"traceEvents": events})).activities
    assert (kernel.op, kernel.launcher, kernel.launch_ts, kernel.stream) == (
        "aten::conv", "cudaLaunchKernel", 5.0, 7
    )  # fmt: skip


def test_small_chunks_give_the_same_trace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Cuts between chunks are found whatever the layout, even with `}, {` inside strings."""
    events = _raw(H200 / "wan-compiled.json.gz")[:3000]
    tricky = {"ph": "X", "cat": "user_annotation", "name": 'a"}, {"b', "pid": 1, "tid": 1,
              "ts": events[100]["ts"], "dur": 1.0}  # fmt: skip
    events = [*events[:200], tricky, *events[200:]]
    document = {"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 7, "tail": [{}]}
    compact = tmp_path / "compact.json.gz"
    compact.write_bytes(gzip.compress(json.dumps(document, separators=(",", ":")).encode()))
    spaced = _write(tmp_path / "spaced.json", document)
    whole = read_kineto(compact)
    assert any(a.name == 'a"}, {"b' for a in whole.annotations)
    monkeypatch.setattr(kineto, "_CHUNK", 4096)
    for path in (compact, spaced):
        chunked = read_kineto(path)
        assert chunked.activities == whole.activities
        assert chunked.cpu_ops == whole.cpu_ops
        assert chunked.annotations == whole.annotations
        assert chunked.event_count == len(events)
        assert chunked.base_ns == 7


class _CountingDecoder:
    """Wraps the chunk decoder to count cuts that were not between two events."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.failed = inner, 0

    def decode(self, data: Any) -> Any:
        try:
            return self.inner.decode(data)
        except kineto.msgspec.DecodeError:
            self.failed += 1
            raise


@pytest.mark.parametrize(
    "token",
    ['"name": "a}, {b"', '"args": {"nested": [{"x": 1}, {"y": 2}]}'],
    ids=["in-string", "in-nested-object"],
)
def test_a_cut_inside_an_event_waits_for_more_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, token: str
) -> None:
    """A chunk ending just after a `}, {` that is not between events: decoded, not split."""
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i,
               "dur": 0.5} for i in range(400)]  # fmt: skip
    text = json.dumps({"traceEvents": events})
    odd = '{"ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1, "ts": 3, "dur": 1, %s}'
    cut = text.index('{"ph": "X", "cat": "cpu_op", "name": "op300"')
    text = text[:cut] + odd % token + ", " + text[cut:]
    path = tmp_path / "t.json"
    path.write_text(text)
    # The first cut is tried on the first two chunks: make them end just inside the token.
    inside = text.index("}, {", text.index(token)) + len("}, {")
    counting = _CountingDecoder(kineto._DECODE_EVENTS)
    monkeypatch.setattr(kineto, "_DECODE_EVENTS", counting)
    monkeypatch.setattr(kineto, "_CHUNK", (inside + 2) // 2)
    trace = read_kineto(path)
    assert counting.failed >= 1
    assert [o.name for o in trace.cpu_ops] == [f"op{i}" for i in range(400)]
    assert len(trace.annotations) == 1 and trace.event_count == 401


def test_progress_reaches_the_file_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kineto, "_CHUNK", 1 << 16)
    path = H200 / "wan-compiled.json.gz"
    calls: list[tuple[int, int]] = []
    read_kineto(path, progress=lambda done, total: calls.append((done, total)))
    size = path.stat().st_size
    assert len(calls) > 2 and calls[-1] == (size, size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)


def _truncated_gzip(path: Path) -> None:
    data = (H200 / "wan-compiled.json.gz").read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_bytes(b""), "empty file"),
        (_truncated_gzip, "truncated gzip"),
        (lambda p: p.write_bytes(random.Random(0).randbytes(5000)), "invalid JSON"),
        (lambda p: p.write_bytes(b"\x1f\x8b" + bytes(100)), "gzip"),
        (lambda p: p.write_bytes(gzip.compress(b"hello, not json")), "invalid JSON"),
        (lambda p: _write(p, {"schemaVersion": 1, "events": []}), "no traceEvents"),
        (lambda p: _write(p, [{"ph": "X"}]), "expected a JSON object"),
        (lambda p: _write(p, {"traceEvents": [{"ph": "X", "ts": "soon"}]}), "traceEvents[0].ts"),
        (lambda p: _write(p, {"traceEvents": {"ph": "X"}}), "unexpected value"),
        (lambda p: p.write_text('{"traceEvents": [{"ph": "X", "ts": 1}, {"ph": '), "invalid JSON"),
    ],
    ids=[
        "missing", "directory", "empty", "truncated-gzip", "random-bytes", "bad-gzip",
        "gzip-not-json", "no-trace-events", "array", "wrong-type", "events-not-list",
        "truncated-json",
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, make: Any, message: str) -> None:
    path = tmp_path / "trace.json.gz"
    make(path)
    with pytest.raises(DiagError) as caught:
        read_kineto(path)
    text = caught.value.message
    assert "\n" not in text
    assert text.startswith(f"{path}: ")
    assert message in text


def test_wrong_type_deep_in_a_big_file_names_the_event(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    events = _raw(H200 / "wan-compiled.json.gz")[:2000]
    events[1500] = {**events[1500], "dur": "long"}
    monkeypatch.setattr(kineto, "_CHUNK", 8192)
    with pytest.raises(DiagError, match=r"traceEvents\[1500\]\.dur"):
        read_kineto(_write(tmp_path / "t.json", {"traceEvents": events}))


# --- the benchmark's trace replicator keeps every join intact ------------------------------


def _synth() -> Any:
    return load_bench("synth_kineto")


def test_replicated_trace_keeps_its_joins(tmp_path: Path) -> None:
    source = H200 / "wan-routing.json.gz"
    original = _parse(source)
    written = _synth().replicate(source, tmp_path / "big.json.gz", 3 * original.event_count)
    big = read_kineto(tmp_path / "big.json.gz")
    assert big.event_count == written >= 3 * original.event_count
    copies = len(big.activities) // len(original.activities)
    assert copies >= 3 and len(big.activities) == copies * len(original.activities)
    assert len({a.correlation for a in big.activities}) == copies * len(
        {a.correlation for a in original.activities}
    )
    assert collections.Counter((a.name, a.launcher, a.op) for a in big.activities) == {
        key: count * copies
        for key, count in collections.Counter(
            (a.name, a.launcher, a.op) for a in original.activities
        ).items()
    }


def test_synthetic_trace_directory(tmp_path: Path) -> None:
    from diag.trace.load import load_trace

    folder = _synth().make_trace_dir(tmp_path / "t", 20_000)
    trace = load_trace(folder)
    assert list(trace.runs) == ["compiled"]
    window = next((folder / "runs" / "compiled").glob("pid*/kineto/r0-s2-steady.json.gz"))
    big = read_kineto(window)
    assert big.event_count >= 20_000
    assert all(a.launcher for a in big.activities) and any(a.region for a in big.activities)
