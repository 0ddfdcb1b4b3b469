"""`diag record` on the reference service: the trace carries the fixtures' ground truth."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from diag.fixtures.ground_truth import expectation
from tests.conftest import RecordFixture, recorded_stderr

from .support import PYTHON, diag_record, events, manifest, of

FIXTURE = (PYTHON, "-m", "diag.fixtures", "--compile", "--backend", "aot_eager")


@pytest.fixture(scope="module")
def unwarmed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace = tmp_path_factory.mktemp("rec") / "trace"
    proc = diag_record(trace, *FIXTURE, "--plant", "unwarmed-shape", "-q")
    assert proc.returncode == 0, proc.stderr
    return trace


def test_manifest_is_complete(unwarmed: Path) -> None:
    m = manifest(unwarmed)
    assert m["format"] == "diag-trace" and m["version"] == 2
    assert m["status"] == "complete"
    assert m["runs"][0]["exit_code"] == 0 and m["runs"][0]["signal"] is None
    assert m["versions"]["torch"].startswith("2.")
    assert m["command"][1:3] == ["-m", "diag.fixtures"]


def test_steps_requests_and_phases(unwarmed: Path) -> None:
    evs = events(unwarmed)
    assert [e["name"] for e in of("adapter", evs)] == ["diag.fixtures"]
    requests = [(e["request_id"], e["phase"], e["shape"]) for e in of("request_start", evs)]
    assert requests == [
        ("warmup0", "warmup", [2, 8, 8]),
        ("warmup1", "warmup", [2, 12, 8]),
        ("r0", "live", [2, 8, 8]),
        ("r1", "live", [2, 8, 12]),
    ]
    steps = [(e["request_id"], e["step"]) for e in of("step_end", evs)]
    assert steps == [("warmup0", 0), ("warmup0", 1), ("warmup1", 0), ("warmup1", 1)] + [
        (r, s) for r in ("r0", "r1") for s in range(4)
    ]
    assert all(e["wall_s"] > 0 for e in of("step_end", evs))


def test_live_recompile_matches_ground_truth(unwarmed: Path) -> None:
    evs = events(unwarmed)
    truth = expectation("unwarmed-shape", "wan").live_recompiles[0]
    live = [e for e in of("recompile", evs) if e["phase"] == "live"]
    assert [(e["request_id"], e["step"]) for e in live] == [(truth.request_id, truth.step)]
    newest = live[0]["guards"][0]
    assert newest["kind"] == "tensor-size"
    assert newest["source"] == "freqs_w"
    assert (newest["expected"], newest["actual"]) == ("4", "6")
    ends = [e for e in of("compile_end", evs) if e["phase"] == "live"]
    assert [e["frame"]["name"] for e in ends] == [truth.frame]
    assert ends[0]["result"] == "ok" and ends[0]["duration_s"] > 0


def test_cache_entries_per_code_object(unwarmed: Path) -> None:
    evs = events(unwarmed)
    final = [e for e in of("cache_entries", evs) if e["when"] == "exit"]
    assert len(final) == 1
    assert {c["name"]: c["entries"] for c in final[0]["codes"]} == {"wan_block_forward": 3}
    per_step = [e for e in of("cache_entries", evs) if e["when"] == "step_end"]
    assert [(e["request_id"], e["step"]) for e in per_step][-1] == ("r1", 0)


def test_profile_windows_default(unwarmed: Path) -> None:
    evs = events(unwarmed)
    windows = [e["window"] for e in of("profile_window_end", evs)]
    # The first live step of each new shape, and a steady window of 2 steps from step 2 of r0.
    assert windows == ["r0-s0-new-shape", "r0-s2-steady", "r1-s0-new-shape"]
    profiled = [(e["request_id"], e["step"]) for e in of("step_end", evs) if e["profiled"]]
    assert profiled == [("r0", 0), ("r0", 2), ("r0", 3), ("r1", 0)]
    proc_dir = next((unwarmed / "runs" / "compiled").glob("pid*"))
    for end in of("profile_window_end", evs):
        with gzip.open(proc_dir / end["file"], "rt") as handle:
            trace = json.load(handle)
        names = {e.get("name", "") for e in trace["traceEvents"]}
        assert any(n.startswith("diag.region:wan_block_forward#") for n in names)
    # The profiler's start-up is outside the step: the window starts before step_start.
    for start in of("profile_window_start", evs):
        following = [e for e in of("step_start", evs) if e["t"] > start["t"]][0]
        assert following["profiled"]


def test_recompile_limit_and_eager_calls(record_fixture: RecordFixture) -> None:
    # The session's shared recording (`--profile none`), which check, the TUI and four
    # analyzers' tests read too.
    shared = record_fixture("recompile-limit")
    evs = events(shared.path)
    hits = of("recompile_limit", evs)
    assert [(e["request_id"], e["step"], e["frame"]["name"]) for e in hits] == [
        ("r1", 0, "wan_block_forward")
    ]
    # After the hit every call's guards are checked: the counter misses every entry, so each
    # block call of r1's later steps ran eagerly (step 0's calls after the hitting one too).
    checked = of("limit_calls", evs)
    assert checked and all(e["compiled"] == 0 and e["eager"] > 0 for e in checked)
    assert {(e["request_id"], e["step"]) for e in checked} >= {("r1", s) for s in (1, 2, 3)}
    guards = [g for e in of("recompile", evs) for g in e["guards"][:1]]
    assert any(g["kind"] == "python-value" and g["source"] == "block.state.cnt" for g in guards)
    assert "1 recompile-limit hit" in recorded_stderr(shared)


def test_latents_bit_identical_with_and_without_diag(tmp_path: Path) -> None:
    import subprocess

    plain = tmp_path / "plain.json"
    subprocess.run([*FIXTURE, "-q", "--json", str(plain)], check=True, capture_output=True)
    recorded = tmp_path / "recorded.json"
    proc = diag_record(tmp_path / "t", *FIXTURE, "-q", "--json", str(recorded))
    assert proc.returncode == 0, proc.stderr
    digests = [
        [r["latents_sha256"] for r in json.loads(p.read_text())["results"]]
        for p in (plain, recorded)
    ]
    assert digests[0] == digests[1]


def test_baseline_eager_is_a_second_run(record_fixture: RecordFixture) -> None:
    # `diag record --baseline eager --profile steady:1 -- FIXTURE -q`, the session's shared
    # recording (tests/analyzers/test_kernel_routing.py reads it too).
    trace = record_fixture(baseline=True, profile="steady:1").path
    m = manifest(trace)
    assert [(r["label"], r["stance"], r["status"]) for r in m["runs"]] == [
        ("compiled", "default", "complete"),
        ("eager", "force_eager", "complete"),
    ]
    compiled, eager = events(trace, "compiled"), events(trace, "eager")
    assert of("compile_end", compiled) and not of("compile_end", eager)
    assert len(of("step_end", compiled)) == len(of("step_end", eager)) == 12
