"""diag.evidence.frames: a frame is a code object (file, first line, name); its label is unique in
a run."""

from __future__ import annotations

from pathlib import Path

from diag.evidence.frames import UNKNOWN, label, labels, qualified, run_labels, short_file
from diag.trace.run import Compile, Frame, RunData

OFFLOAD = "/src/LightX2V/lightx2v/models/networks/wan/infer/offload/transformer_infer.py"
COMMON = "/src/LightX2V/lightx2v/common/transformer_infer/transformer_infer.py"
LAMBDAS = [Frame("<lambda>", OFFLOAD, line) for line in (124, 125, 126)]
BLOCK = Frame("block_runner", COMMON, 21)


def _compile(frame: Frame | None, cid: str) -> Compile:
    return Compile(cid, 0, frame, "ok", 0.1, 0, None, "warmup", "w1", 0, 1)


def test_short_file_keeps_the_folder() -> None:
    assert short_file(OFFLOAD) == "offload/transformer_infer.py"
    assert short_file("wan.py") == "wan.py"


def test_names_that_collide_get_file_and_line() -> None:
    found = labels([*LAMBDAS, BLOCK, None, LAMBDAS[0]])
    assert found[BLOCK] == "block_runner"
    assert [found[f] for f in LAMBDAS] == [
        "<lambda>@offload/transformer_infer.py:124",
        "<lambda>@offload/transformer_infer.py:125",
        "<lambda>@offload/transformer_infer.py:126",
    ]
    assert found[None] == UNKNOWN
    assert qualified(BLOCK) == "block_runner@transformer_infer/transformer_infer.py:21"


def test_same_short_file_falls_back_to_the_full_path() -> None:
    a = Frame("forward", "/a/models/block.py", 10)
    b = Frame("forward", "/b/models/block.py", 10)
    found = labels([a, b])
    assert found[a] == "forward@/a/models/block.py:10"
    assert found[b] == "forward@/b/models/block.py:10"


def test_run_labels_follow_the_run() -> None:
    run = RunData("compiled", Path("."), "complete")
    run.compiles = [_compile(LAMBDAS[0], "0/0")]
    assert label(run, LAMBDAS[0]) == "<lambda>"
    run.compiles.append(_compile(LAMBDAS[1], "1/0"))
    assert label(run, LAMBDAS[0]) == "<lambda>@offload/transformer_infer.py:124"
    run.cache_final[(1, LAMBDAS[2])] = 2
    assert run_labels(run)[LAMBDAS[2]] == "<lambda>@offload/transformer_infer.py:126"
    assert label(run, Frame("other", None, None)) == "other"
    assert label(run, None) == UNKNOWN
