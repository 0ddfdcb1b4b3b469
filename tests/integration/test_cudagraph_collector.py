"""collectors/cudagraphs.py in a real recorded program on CPU.

A CPU cannot record a CUDA graph, so the program fires what torch fires around one by hand:
`callback_handler.install_callbacks(CUDAGRAPH_RECORDING, id)`, which cudagraph trees wrap each
recording in, and `log_cudagraph_skip_and_bump_counter`, torch's own run-time skip warning. Those
two inputs are simulated; the compile, the steps and the recorder are real. The H200 recordings
in tests/analyzers/test_cudagraphs.py are the real thing.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.integration.support import PYTHON, diag_record, events

PROGRAM = textwrap.dedent(
    """
    import torch
    import diag.api as diag
    from torch._dynamo.callback import CallbackTrigger, callback_handler
    from torch._inductor import cudagraph_utils

    f = torch.compile(lambda x: x * 2, backend="aot_eager")
    with diag.phase("warmup"):
        f(torch.ones(3))
    with diag.request("r0"):
        for index in range(3):
            with diag.step():
                print(float(f(torch.ones(3)).sum()))
                if index == 1:
                    with callback_handler.install_callbacks(
                        CallbackTrigger.CUDAGRAPH_RECORDING, "0/0"
                    ):
                        pass
                    cudagraph_utils.log_cudagraph_skip_and_bump_counter(
                        "skipping cudagraphs due to mutated inputs (1 instances). Found from : x"
                    )
    """
)


def test_recording_and_skip_events_land_in_their_step(tmp_path: Path) -> None:
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    result = diag_record(tmp_path / "trace", PYTHON, str(program), options=("--force",))
    assert result.returncode == 0, result.stderr
    # The program's output is its own: the skip warning torch prints, once, and its numbers.
    assert result.stdout.count("6.0") == 3
    assert result.stderr.count("skipping cudagraphs due to mutated inputs") == 1
    found = events(tmp_path / "trace")
    [record] = [e for e in found if e["ev"] == "cudagraph_record"]
    assert record["compile_id"] == "0/0" and record["request_id"] == "r0" and record["step"] == 1
    assert record["duration_s"] >= 0 and record["reserved_before"] is None  # CUDA never started
    [skip] = [e for e in found if e["ev"] == "cudagraph_skip"]
    assert skip["message"].startswith("skipping cudagraphs due to mutated inputs")
    assert skip["step"] == 1
    assert not [e for e in found if e["ev"] == "collector_error"]
    # Dynamo's own compiles pass through the same callbacks and leave no recording behind.
    assert sum(1 for e in found if e["ev"] == "compile_end") == 1
