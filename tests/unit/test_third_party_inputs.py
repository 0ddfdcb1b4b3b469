"""The readers on other tools' test data (tests/data/third_party: pytorch/tlparse and HTA test
inputs), and the damage a copied log or trace meets on its way to a user."""

from __future__ import annotations

import gzip
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from diag.errors import DiagError
from diag.findings.analysis import analyze
from diag.trace.inputs import input_warnings, open_input
from diag.trace.torchtrace import load_torch_trace

THIRD_PARTY = Path(__file__).resolve().parents[1] / "data" / "third_party"
TLPARSE = THIRD_PARTY / "tlparse"
HTA = THIRD_PARTY / "hta"


def _plain(tmp_path: Path, name: str) -> bytes:
    return gzip.decompress((TLPARSE / name).read_bytes())


# --- item: gzip damage and stray bytes in a TORCH_TRACE log ------------------------------------


def test_a_corrupt_gzip_log_is_one_line_like_the_kineto_reader(tmp_path: Path) -> None:
    """Not exit 0 with "process killed": the same words the Kineto reader uses."""
    data = bytearray((TLPARSE / "comp_metrics.log.gz").read_bytes())
    data[len(data) // 2] ^= 0xFF
    log = tmp_path / "damaged.log.gz"
    log.write_bytes(bytes(data))
    with pytest.raises(DiagError, match="corrupt gzip data|truncated gzip") as info:
        load_torch_trace(log)
    assert str(log) in info.value.message and "\n" not in info.value.message


def test_a_truncated_gzip_log_names_the_damage(tmp_path: Path) -> None:
    data = (TLPARSE / "comp_metrics.log.gz").read_bytes()
    log = tmp_path / "cut.log.gz"
    log.write_bytes(data[: len(data) * 2 // 3])
    with pytest.raises(DiagError, match="truncated gzip file"):
        load_torch_trace(log)


def test_one_invalid_utf8_byte_keeps_the_failed_compile(tmp_path: Path) -> None:
    """tlparse's comp_failure.log with one Latin-1 byte in its compilation_metrics line: the
    record (and the failed compile it reports) stays, and the reader says what it replaced."""
    data = _plain(tmp_path, "comp_failure.log.gz")
    at = data.index(b'"co_filename": "') + len(b'"co_filename": "')
    log = tmp_path / "latin1.log"
    log.write_bytes(data[:at] + b"caf\xe9/" + data[at:])
    trace = load_torch_trace(log)
    assert trace.compiled is not None
    results = [c.result for c in trace.compiled.compiles]
    assert results == ["failed"]
    frame = trace.compiled.compiles[0].frame
    assert frame is not None and frame.file is not None and "caf\ufffd/" in frame.file
    assert any("not UTF-8" in w for w in input_warnings(trace))
    clean = load_torch_trace(TLPARSE / "comp_failure.log.gz")
    assert [c.result for c in clean.compiled.compiles] == ["failed"]  # type: ignore[union-attr]
    assert not input_warnings(clean)


# --- compile ids from the envelope; a torch wrapper frame points at the user's call ------------


def test_compile_ids_come_from_the_record_envelope() -> None:
    """tlparse shows 0/0..0/3 for this log; its compilation_metrics say 0/1 three times."""
    trace = load_torch_trace(TLPARSE / "collectives_parity_rank_0.log.gz")
    run = trace.compiled
    assert run is not None
    assert [c.compile_id for c in run.compiles] == ["0/0", "0/1", "0/2", "0/3"]
    assert {c.epoch for c in run.compiles} == {0}  # no invented torch._dynamo.reset()


def test_object_identity_in_torchs_wrapper_points_at_the_users_call() -> None:
    trace = load_torch_trace(TLPARSE / "collectives_parity_rank_0.log.gz")
    run = trace.compiled
    assert run is not None
    frame = run.compiles[-1].frame
    assert frame is not None and frame.name == "inner"
    assert frame.called_from == "/home/skarjala/pytorch/test2.py:165"
    findings = importlib.import_module("diag.analyzers").run_analyzers(trace)
    churn = [f for f in findings if f.analyzer == "guard-churn"]
    assert len(churn) == 1
    assert churn[0].location == "/home/skarjala/pytorch/test2.py:165"
    assert "wrap_inline" in churn[0].fix and "Pass the object's tensors" not in churn[0].fix
    assert any("external_utils.py:66), entered from" in line for line in churn[0].evidence)


# --- ranks: from inside a log, from tlparse's file names, never two logs on one rank -----------


def test_ranks_come_from_tlparse_style_names() -> None:
    """`dedicated_log_torch_trace_rank_N.log` (no suffix after N) names the rank, and the
    4-rank divergence of tlparse's multi_rank_logs is reported (rank 1: 15 compiles)."""
    trace = load_torch_trace(TLPARSE / "multi_rank_logs")
    run = trace.compiled
    assert run is not None
    assert sorted(p.rank for p in run.processes) == [0, 1, 2, 3]  # type: ignore[type-var]
    by_rank = {p.rank: sum(c.pid == p.pid for c in run.compiles) for p in run.processes}
    assert by_rank[1] == 15
    findings = importlib.import_module("diag.analyzers").run_analyzers(trace)
    divergence = [f for f in findings if f.analyzer == "rank-divergence"]
    assert any("rank 1: 15" in f.title for f in divergence)
    ids = [f.id for f in findings]
    assert len(ids) == len(set(ids))


def test_logs_that_say_the_same_rank_are_not_merged() -> None:
    """tlparse's multi_rank_schedule: three logs named rank 0, 1, 2 that all say rank 0."""
    trace = load_torch_trace(TLPARSE / "multi_rank_schedule")
    run = trace.compiled
    assert run is not None
    assert sorted(p.rank for p in run.processes) == [0, 1, 2]  # type: ignore[type-var]
    warnings = input_warnings(trace)
    assert any("3 logs say rank 0 inside" in w and "from their file names" in w for w in warnings)
    findings = importlib.import_module("diag.analyzers").run_analyzers(trace)
    ids = [f.id for f in findings]
    assert len(ids) == len(set(ids))


def test_same_rank_without_names_to_tell_them_apart(tmp_path: Path) -> None:
    data = gzip.decompress(
        (TLPARSE / "multi_rank_schedule" / "dedicated_log_torch_trace_rank_2.log.gz").read_bytes()
    )
    (tmp_path / "a.log").write_bytes(data)
    (tmp_path / "b.log").write_bytes(data)
    trace = load_torch_trace(tmp_path)
    run = trace.compiled
    assert run is not None
    assert [p.rank for p in run.processes] == [0, None]
    assert any("2 logs claim rank 0 (a.log, b.log)" in w for w in input_warnings(trace))


def test_a_byte_order_mark_is_read_past(tmp_path: Path) -> None:
    from diag.trace.kineto import read_kineto

    trace = gzip.decompress((HTA / "trace_compare_base.json.gz").read_bytes())
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + trace)
    (tmp_path / "plain.json").write_bytes(trace)
    with_bom, plain = read_kineto(tmp_path / "bom.json"), read_kineto(tmp_path / "plain.json")
    assert with_bom.activities == plain.activities and plain.activities
    log = _plain(tmp_path, "comp_metrics.log.gz")
    (tmp_path / "bom.log").write_bytes(b"\xef\xbb\xbf" + log)
    loaded = load_torch_trace(tmp_path / "bom.log")
    assert loaded.manifest["torch_trace"]["skipped_lines"] == 0
    assert len(loaded.compiled.compiles) == len(
        load_torch_trace(TLPARSE / "comp_metrics.log.gz").compiled.compiles
    )  # type: ignore[union-attr]


# --- GPU idle per step, and offload-bound only where copies fill the GPU -----------------------

SHARED_KINETO = Path(__file__).resolve().parents[1] / "data" / "shared" / "kineto"


def _rows(path: Path) -> list[Any]:
    from diag.evidence.offload import offload_breakdown

    trace = open_input(kineto=path)
    assert trace.compiled is not None
    return offload_breakdown(trace.compiled)


def test_a_trace_without_steps_measures_idle_in_the_gpus_own_window() -> None:
    """HTA's AlexNet trace: 30 s of CPU start-up before any GPU work is not GPU idle (diag said
    43.36 s; the GPU's window, first activity to last, is 12.9 s), and copies that outlast
    compute on a GPU idle 99% of that window are not offload-bound."""
    (row,) = _rows(HTA / "critical_path_alexnet.json.gz")
    assert 12.8 < row.idle_s < 13.0
    assert not row.bound
    assert row.max_gain_s <= row.kernel_s  # compiling shrinks compute only
    findings = analyze(open_input(kineto=HTA / "critical_path_alexnet.json.gz"))
    assert not [f for f in findings if f.analyzer == "offload-bound"]


def test_idle_when_the_gpu_runs_a_step_behind() -> None:
    """HTA's ns_resolution trace (shared/data copy): each step's kernels run during the next
    step's CPU side; the previous step's work is not this step's idle (91 ms before, ~1 ms)."""
    path = SHARED_KINETO / "hta_v100_training_rank0.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent (a CI clone without shared/)")
    rows = _rows(path)
    assert [r.step for r in rows] == [101, 102, 103, 104, 105]
    assert all(r.idle_s < 0.01 for r in rows), [r.idle_s for r in rows]
    assert all(r.kernel_s > 0.09 for r in rows)


def _behind_document() -> dict[str, Any]:
    """Two steps whose kernels run 8 and 7 ms after launch, the first into the next step:
    made by hand (a real GPU this far behind needs a long queue), one kernel per step."""
    events: list[dict[str, Any]] = []
    for n, start in enumerate((0, 10_000)):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n}",
                       "ts": start, "dur": 10_000, "pid": 1, "tid": 1})  # fmt: skip
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel",
                       "ts": start + 100, "dur": 5, "pid": 1, "tid": 1,
                       "args": {"correlation": n + 1}})  # fmt: skip
        events.append({"ph": "X", "cat": "kernel", "name": "k", "ts": (8_000, 17_000)[n],
                       "dur": 9_000, "pid": 0, "tid": 7,
                       "args": {"correlation": n + 1, "device": 0, "stream": 7}})  # fmt: skip
    return {"traceEvents": events}


def test_the_previous_steps_gpu_work_is_not_idle(tmp_path: Path) -> None:
    path = tmp_path / "behind.json"
    path.write_text(json.dumps(_behind_document()))
    rows = _rows(path)
    # Step 0: idle from its start to its kernel (8 ms). Step 1: its kernel starts when step
    # 0's ends (17 ms), so its window is that kernel alone: no idle.
    assert [round(r.idle_s * 1e3, 3) for r in rows] == [8.0, 0.0]


# --- inputs that hold nothing diag reads: a notice, never a bare "No findings" -----------------


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("mtia_inference_rank_0.json.gz", "events of an accelerator diag does not read"),
        ("cupti_profiler.json.gz", "CUPTI range-profiler trace (77 cuda_profiler_range"),
        ("cpu_only.json.gz", "no GPU activity in the trace"),
    ],
)
def test_a_trace_without_what_diag_reads_says_so(name: str, needle: str) -> None:
    warnings = input_warnings(open_input(kineto=HTA / name))
    assert any(needle in w for w in warnings), warnings


def test_an_empty_trace_and_an_ordinary_one(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    assert input_warnings(open_input(kineto=empty)) == [
        "the trace holds no events (traceEvents is empty): nothing was analyzed"
    ]
    # A trace with GPU kernels stays quiet.
    assert input_warnings(open_input(kineto=HTA / "triton_example.json.gz")) == []


def test_an_export_log_says_it_holds_no_compiles() -> None:
    for name in ("export.log.gz", "export_guard_added.log.gz"):
        warnings = input_warnings(load_torch_trace(TLPARSE / name))
        assert any("no compilation_metrics record" in w and "torch.export" in w for w in warnings)
    assert not any(
        "no compilation_metrics" in w
        for w in input_warnings(load_torch_trace(TLPARSE / "comp_metrics.log.gz"))
    )


def test_gpu_work_without_a_launch_record_belongs_to_no_step() -> None:
    """HTA's trace_compare base: 16 of its 18 GPU activities have no launch in the trace (HTA
    counts 2 kernels and no copy); they are in no step, and the reader says so."""
    trace = open_input(kineto=HTA / "trace_compare_base.json.gz")
    assert trace.compiled is not None and trace.compiled.profiles
    in_steps = [a for p in trace.compiled.profiles for a in p.activities]
    assert in_steps and all(a.launch_ts >= 0 for a in in_steps)
    assert sum(a.kind == "kernel" for a in in_steps) == 2  # HTA's count
    assert any("16 GPU activities" in w and "no launch record" in w for w in input_warnings(trace))


# --- two plain traces compared: no "eager" and "torch.compile", no template false alarm --------

H200 = Path(__file__).resolve().parents[1] / "data" / "h200"
# Kernel names as they appear in HTA's trace_diff pair (test.json.gz / control.json.gz).
_FBGEMM = (
    "void split_embedding_backward_codegen_rowwise_adagrad_unweighted_kernel_cta_per_row_1"
    "<float, float, float, {n}ul>(at::GenericPackedTensorAccessor<float, 2ul, "
    "at::RestrictPtrTraits, int>" + ", at::GenericPackedTensorAccessor<float, 1ul>" * 120 + ")"
)


def test_two_plain_traces_are_named_by_their_files() -> None:
    trace = open_input(
        kineto=H200 / "wan-routing.json.gz", against=H200 / "wan-routing-eager.json.gz"
    )
    (finding,) = [f for f in analyze(trace) if f.analyzer == "kernel-routing"]
    assert "runs in wan-routing-eager.json.gz but not in wan-routing.json.gz" in finding.title
    assert "eager" not in finding.title.replace("wan-routing-eager", "")
    assert "torch.compile" not in finding.title


def test_a_template_variant_is_not_routing() -> None:
    from analyzers.kernel_routing import _without_template_variants, short_name
    from diag.evidence.regions import KernelStat, RegionComparison

    before, after = _FBGEMM.format(n=2), _FBGEMM.format(n=5)
    assert len(before) > 5000
    comparison = RegionComparison(
        region="whole step",
        device="gpu",
        reference=[KernelStat(before, "custom", 4, 0.01)],
        compiled=[KernelStat(after, "custom", 4, 0.02)],
        reference_s=0.01,
        compiled_s=0.02,
        missing=[before],
        replacements=[after],
        steps=6,
    )
    assert _without_template_variants(comparison).missing == []
    assert len(short_name(before)) <= 120


def test_trace_diff_names_another_gpu_and_stays_quiet_on_a_twin(tmp_path: Path) -> None:
    """The real H200 eager trace against a copy whose deviceProperties say A100 (HTA's
    trace_diff pair, V100 against A100, is 3.3 MB: bench/agreement.py runs on it instead)."""
    document = json.loads(gzip.decompress((H200 / "wan-eager.json.gz").read_bytes()))
    assert document["deviceProperties"][0]["name"] == "NVIDIA H200"
    document["deviceProperties"][0]["name"] = "NVIDIA A100-SXM4-80GB"
    other = tmp_path / "a100.json"
    other.write_text(json.dumps(document))
    trace = open_input(kineto=H200 / "wan-eager.json.gz", against=other)
    (finding,) = [f for f in analyze(trace) if f.analyzer == "trace-diff"]
    assert "different GPU (NVIDIA H200 vs NVIDIA A100-SXM4-80GB)" in finding.title
    twin = open_input(kineto=H200 / "wan-eager.json.gz", against=H200 / "wan-eager.json.gz")
    assert not [f for f in analyze(twin) if f.analyzer == "trace-diff"]
