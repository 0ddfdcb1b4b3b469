"""The period of a hand-written loop's compiled calls (collectors/adapters/call_period.py).

Pure bookkeeping over call keys, so the keys here are written by hand: the real runs that feed
it are in tests/integration/test_adapter_compiled_calls.py and the H200 magi-loop recording.
"""

from __future__ import annotations

from collectors.adapters.call_period import MAX_SEQUENCE, REQUEST, STEP, CallPeriod


def _key(n: int, line: int = 20) -> tuple[int, None, tuple[tuple[str, int], ...]]:
    """Call n of the loop body (block n), from the loop's line `line`."""
    return (n, None, (("loop.py", line), ("serve.py", 7)))


def _iteration(period: CallPeriod, calls: int = 9) -> list[str]:
    return [period.boundary(_key(n)) for n in range(calls)]


def test_steps_start_at_each_repetition_of_the_loop_body() -> None:
    period = CallPeriod()
    first = _iteration(period)
    assert first == [STEP] + [""] * 8
    assert period.period is None  # not known until the first call comes back
    assert _iteration(period) == [STEP] + [""] * 8
    assert period.period == 9


def test_only_a_period_s_last_call_may_end_a_step() -> None:
    period = CallPeriod()
    ends = []
    for _ in range(3):
        for n in range(9):
            period.boundary(_key(n))
            ends.append(period.may_end_step())
    # Until the period is known every call may end the step; then only each ninth.
    assert all(ends[:9])
    assert ends[9:] == ([False] * 8 + [True]) * 2


def test_a_request_longer_than_the_remembered_calls_keeps_its_steps() -> None:
    """Past MAX_SEQUENCE calls the learned period still cuts steps (it cut every call, or
    none, once the remembered sequence stopped growing)."""
    period = CallPeriod()
    starts = 0
    calls = MAX_SEQUENCE + 9 * 50
    for index in range(calls):
        starts += period.boundary(_key(index % 9)) == STEP
    assert starts == -(-calls // 9)
    assert period.may_end_step() is (calls % 9 == 0)


def test_the_loop_entered_anew_is_a_new_request() -> None:
    period = CallPeriod()
    _iteration(period)
    _iteration(period)
    period.boundary(_key(0))
    # Where the period expects block 0 a different call comes: the loop began again.
    for n in range(1, 9):
        period.boundary(_key(n))
    assert period.boundary(_key(99, line=31)) == REQUEST


def test_a_call_that_raised_and_its_retry_stay_one_step() -> None:
    """A program catches a compile error and runs the call again another way (under
    force_eager, from another line). With the period of one call learnt from an earlier
    request, the retry would read as the loop entered anew; after a raise the period is learnt
    again from that step: each iteration is [call that raised, retry]. The next request, with
    no retry, learns its own period again."""
    period = CallPeriod()
    period.boundary(_key(0))
    assert period.boundary(_key(0)) == STEP  # an earlier request: one call per step
    assert period.period == 1
    period.reset()
    starts = []
    for _ in range(3):
        starts.append(period.boundary(_key(0)))
        period.relearn()  # it raised
        starts.append(period.boundary(_key(0, line=31)))  # the retry
    assert starts == [STEP, "", STEP, "", STEP, ""]
    period.reset()
    assert [period.boundary(_key(0)) for _ in range(3)] == [STEP] * 3
