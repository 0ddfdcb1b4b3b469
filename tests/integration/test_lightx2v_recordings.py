"""The real LightX2V, recorded by `diag record`, analyzed here on CPU.

tests/data/lightx2v/<case>/ holds what `python bench/lightx2v_real.py --save-test-data` kept of
three recordings of ModelTC/LightX2V f8aee98 (unmodified), run through its own
`python -m lightx2v.infer` on a tiny random Wan2.1 T2V on a 2-core CPU (torch 2.13, inductor):
warmup at 64x64 and 96x64, one request at `--target_shape 64 96`, 3 steps, with model, block
and phase offload (on a CPU every case offloads: LightX2V stages host-loaded weights for the
device), and `warm-width`, model offload with diag's fix applied (warmup at 64x64 and 96x96).
Each folder has the manifest, the event file and LightX2V's own step log lines
(tests/data/lightx2v/README.md). Nothing here is synthetic: the findings are what diag says
about a real LightX2V run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.findings.analysis import analyze
from diag.findings.model import Finding
from diag.trace.load import load_trace
from diag.trace.run import RunData, Trace

DATA = Path(__file__).resolve().parent.parent / "data" / "lightx2v"
CASES = ("model-offload", "block-offload", "phase-offload")
GUARD = "self.cos_sin._base.stride()[0] == 64*self.cos_sin._base.size()[1]"
# Latent shapes [C, T, H, W] of the warmup resolutions 64x64 and 96x64 and of the request 64x96.
WARMUP_SHAPES = [[16, 2, 8, 8], [16, 2, 12, 8]]
LIVE_SHAPE = [16, 2, 8, 12]
BLOCK_RUNNER = "lightx2v/common/transformer_infer/transformer_infer.py:21"
PHASE_FILE = "lightx2v/models/networks/wan/infer/offload/transformer_infer.py"


def _trace(case: str) -> Trace:
    return load_trace(DATA / case)


def _run(case: str) -> RunData:
    run = _trace(case).compiled
    assert run is not None
    return run


def _errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


@pytest.mark.parametrize("case", CASES)
def test_live_request_recompiles_at_step_0_on_the_cos_sin_stride_guard(case: str) -> None:
    findings = analyze(_trace(case))
    (error,) = _errors(findings)
    assert error.analyzer == "live-compile"
    assert (error.data["request_id"], error.data["steps"]) == ("r3", [0])
    assert GUARD in error.title
    (guard,) = error.data["guards"]
    assert (guard["kind"], guard["source"], guard["step"]) == (
        "tensor-stride",
        "self.cos_sin._base",
        0,
    )
    where = BLOCK_RUNNER if case != "phase-offload" else f"{PHASE_FILE}:124"
    assert error.location is not None and error.location.endswith(where)
    assert error.data["shape"] == LIVE_SHAPE
    assert error.data["uncovered"] == ["width"]
    text = "\n".join(error.evidence)
    assert "width 12 was never warmed: warmup kept the width at 8" in text
    # The guard explained: an attribute of `self`, through a view's base, a baked-in width.
    assert "`self.cos_sin` is the attribute `cos_sin` of `self`" in text
    assert "Dynamo guards the tensor it was cut from, `self.cos_sin._base`" in text
    assert "the constant 64" in text and "width x channels = 64" in text
    assert "on the input that carries" not in error.fix
    assert "not an input of" in error.fix and "`cos_sin` of `self`" in error.fix
    assert "a second value of width in warmup" in error.fix


@pytest.mark.parametrize("case", CASES)
def test_steps_match_lightx2v_own_log(case: str) -> None:
    """diag's live steps are LightX2V's `infer_main` calls: same count, same durations. diag's
    step is the very call LightX2V times, from inside: never longer (but for clock noise), and
    shorter by what the step hooks do outside their own clock (0.2-29 ms in these recordings,
    on a 2-core machine shared with other jobs)."""
    run = _run(case)
    log = (DATA / case / "lightx2v.log").read_text()
    costs = [float(v) for v in re.findall(r"infer_main cost ([\d.]+) seconds", log)]
    indices = re.findall(r"==> step_index: (\d+) / (\d+)", log)
    live = [s for s in run.steps if s.phase == "live"]
    assert [(s.request_id, s.index) for s in live] == [("r3", 0), ("r3", 1), ("r3", 2)]
    assert [(int(i) - 1, int(n)) for i, n in indices] == [(s.index, 3) for s in live]
    assert len(costs) == len(live)
    for step, cost in zip(live, costs, strict=True):
        assert step.wall_s is not None
        assert step.wall_s <= cost + 0.005
        assert step.wall_s >= cost - 0.05
    assert log.count("Warmup: ") == 2
    assert [r.request_id for r in run.requests if r.phase == "warmup"] == ["w1", "w2"]


@pytest.mark.parametrize("case", CASES)
def test_request_shapes_come_from_lightx2v_input_info(case: str) -> None:
    """The live request has its shape at request_start (from input_info.target_shape through
    the runner), so three distinct shapes were served, as LightX2V served three."""
    from diag.tui.cache import _infos

    run = _run(case)
    assert [(r.request_id, r.phase, r.shape) for r in run.requests] == [
        ("w1", "warmup", WARMUP_SHAPES[0]),
        ("w2", "warmup", WARMUP_SHAPES[1]),
        ("r3", "live", LIVE_SHAPE),
    ]
    infos = _infos("compiled", run)
    assert infos and all(info.shapes == ["16x2x8x8", "16x2x12x8", "16x2x8x12"] for info in infos)


@pytest.mark.parametrize("case", CASES)
def test_cache_entries_stay_within_the_shapes_served(case: str) -> None:
    """Three request shapes, at most three entries per code object (one per shape class that
    recompiled): cache-bloat, which compares entries with the distinct request shapes, stays
    quiet, and its count of shapes is the three LightX2V served."""
    run = _run(case)
    shapes = {tuple(r.shape) for r in run.requests if r.shape}
    assert len(shapes) == 3
    entries = sorted(run.cache_entries().values())
    assert entries == ([2, 2, 3] if case == "phase-offload" else [3])
    assert not [f for f in analyze(_trace(case)) if f.analyzer == "cache-bloat"]


def test_phase_offload_three_lambdas_are_three_frames() -> None:
    """LightX2V keeps one lambda per phase (offload/transformer_infer.py:124-126) so that
    phases do not share guards; diag keeps them apart too: three frames, each with its own
    compiles, and only the one that recompiled live is an error."""
    trace = _trace("phase-offload")
    run = trace.compiled
    assert run is not None
    lines = sorted({c.frame.line for c in run.compiles if c.frame is not None})
    assert lines == [124, 125, 126]
    assert {c.frame.name for c in run.compiles if c.frame is not None} == {"<lambda>"}
    findings = analyze(trace)
    ids = [f.id for f in findings]
    assert len(ids) == len(set(ids))
    (error,) = _errors(findings)
    assert error.id == "live-compile:<lambda>@offload/transformer_infer.py:124:r3"
    assert error.data["frame"] == "<lambda>@offload/transformer_infer.py:124"
    assert error.data["compile_ids"] == ["0/2"]
    assert "first compile of" not in "\n".join(error.evidence)
    (warm,) = [f for f in findings if f.id == "live-compile:warmup-compiles"]
    per_frame = [line.split(":")[0:2] for line in warm.evidence if line.startswith("<lambda>")]
    assert per_frame == [
        ["<lambda>@offload/transformer_infer.py", "124"],
        ["<lambda>@offload/transformer_infer.py", "125"],
        ["<lambda>@offload/transformer_infer.py", "126"],
    ]
    assert all(": 2 compile(s)," in line for line in warm.evidence if line.startswith("<lambda>"))


def test_tui_evidence_of_a_lambda_shows_that_lambda_only() -> None:
    """Enter on the phase-offload error opens the Compiles screen filtered to its frame: the
    lambda at :124, not its two siblings that share the name."""
    from diag.evidence.frames import label
    from diag.tui.compiles import CompileInfo, CompilesView
    from diag.tui.evidence import evidence_for
    from diag.tui.filtering import matches, parse_query

    trace = _trace("phase-offload")
    run = trace.compiled
    assert run is not None
    (error,) = _errors(analyze(trace))
    evidence = evidence_for(error)
    assert evidence is not None and evidence.tab == "compiles"
    view = CompilesView()
    rows = [view._row(CompileInfo("compiled", c, "", label(run, c.frame))) for c in run.compiles]

    def shown(text: str) -> list[tuple[str, int | None]]:
        query = parse_query(text, CompilesView.ALIASES)
        items = [r.payload.item for r in rows if matches(query, r.fields, CompilesView.EXACT)]
        return [(c.compile_id, c.frame.line if c.frame else None) for c in items]

    assert shown(evidence.query) == [("0/2", 124)]
    frame_only = " ".join(t for t in evidence.query.split() if t.startswith("frame:"))
    assert shown(frame_only) == [("0/0", 124), ("0/1", 124), ("0/2", 124)]


def test_warming_a_second_width_removes_the_live_recompile() -> None:
    """diag's fix applied (`warm-width`: warmup at 64x64 and 96x96, the same request at 64x96):
    warmup varied the width, automatic dynamic made it dynamic, and nothing compiles live."""
    trace = _trace("warm-width")
    run = trace.compiled
    assert run is not None
    assert [(r.request_id, r.phase, r.shape) for r in run.requests] == [
        ("w1", "warmup", [16, 2, 8, 8]),
        ("w2", "warmup", [16, 2, 12, 12]),
        ("r3", "live", LIVE_SHAPE),
    ]
    assert [(c.phase, c.request_id) for c in run.compiles] == [("warmup", "w1"), ("warmup", "w2")]
    findings = analyze(trace)
    assert not [f for f in findings if f.severity in ("error", "warning")]
    (coverage,) = [f for f in findings if f.id == "live-compile:warmup-coverage"]
    assert coverage.title == "Warmup covered every live shape (1)"
