"""Steps and requests inferred from a program's outermost calls, for programs no adapter knows.

Two adapters infer: diffusers models called outside any pipeline (`diffusers.py`) and, for any
other program, the outermost calls into compiled code (`compiled_calls.py`). Each outermost call
is one step. Requests are not visible in such a program, so they are inferred: a new request
starts at the first step, and then when

- the step's input shape differs from the previous step's (a new resolution),
- a diffusers scheduler's `set_timesteps` ran since the previous step (a new denoising loop),
- the call's timestep (a `timestep`/`t`/`sigma` keyword holding a number or a CPU tensor)
  moves against the direction the request's timesteps have been moving (a denoising loop's
  timesteps fall, or rise, monotonically; the next loop starts over). Equal timesteps (a
  guidance pass calling the model twice per step) never start one; a timestep on an
  accelerator is not read (reading it would synchronise the device);
- or the pause since the previous step ended is much longer than the request's steps
  (more than PAUSE_FACTOR times their median and more than PAUSE_FLOOR_S), unless the call's
  timestep moved on in the request's direction (a worker that waited while another thread
  compiled is still in its denoising loop).

Each thread is followed on its own (`InferredLane`): a worker pool's threads serve their own
requests, at the same time or not, and a step or request open in one thread is nothing to
another.

A request ends when the next one starts, or at exit. An inferring adapter yields to any adapter
that knows the boundaries and to one that infers better (a diffusers model's calls over the
compiled calls inside it): the inferred step and request open at that moment are closed, then
the `adapter` event is written again with the new name (see `Session.announce_adapter`).
"""

from __future__ import annotations

import ctypes
import statistics
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..protocol import Session

#: Ranks passed to `Session.announce_adapter`: a higher one replaces a lower one (diag.phase
#: announces at 2, an adapter that reports requests at 3).
RANK_COMPILED_CALLS = 0
RANK_MODEL_CALLS = 1

PAUSE_FLOOR_S = 1.0
PAUSE_FACTOR = 10.0

_ACTIVE: list[InferredSteps] = []


def close_all() -> None:
    """At exit: an inferred step still open (in any thread) ends at its last compiled call, not
    at the process's end (which would count everything after the loop: decoding, saving,
    teardown)."""
    for inferred in _ACTIVE:
        for lane in list(inferred.lanes):
            if lane.open and lane.last_call is not None:
                inferred.end_lane(lane, at_last_call=True)


def close_returned() -> None:
    """The program raised between calls: a step left open after its call returned
    (`spans_calls`) ends at its last compiled call, so the crash is placed after it."""
    for inferred in _ACTIVE:
        for lane in list(inferred.lanes):
            if lane.open and inferred.spans_calls and lane.returned:
                inferred.end_lane(lane, at_last_call=True)


def every_adapter_silent() -> bool:
    """Every inferring adapter stood down: none reads calls into compiled code."""
    for inferred in _ACTIVE:  # a loop, not all(): asked before every compiled call
        if not inferred.silent:
            return False
    return True


def note_call_end(at: tuple[int, int], target: Any, torch: Any) -> None:
    """An outermost call into compiled code ended: a step left open between model calls (a
    hand-written loop's scheduler update, a compiled helper) lasts at least until then. An
    autoencoder's call (decoding after the loop) is no part of a denoising step."""
    owner = getattr(target, "__self__", target)
    if isinstance(owner, torch.nn.Module) and is_autoencoder(owner):
        return
    for inferred in _ACTIVE:
        if inferred.spans_calls:
            lane = inferred.lane()
            if lane.open:
                lane.last_call = at


def step_open_after_call() -> bool:
    """A step left open after its call returned (`spans_calls`), in this thread: the next
    compiled call's end may be where it ends."""
    for inferred in _ACTIVE:
        if inferred.spans_calls:
            lane = inferred.lane()
            if lane.open and lane.returned:
                return True
    return False


def is_autoencoder(module: Any) -> bool:
    """A model with `encode` and `decode` (a VAE): its calls are no denoising steps."""
    return callable(getattr(module, "encode", None)) and callable(getattr(module, "decode", None))


def mark_request_boundary() -> None:
    """A denoising loop starts in this thread (a scheduler's `set_timesteps`): the thread's
    next step opens a request."""
    for inferred in _ACTIVE:
        inferred.lane().boundary = True


class InferredLane:
    """One thread's inferred request and step: each thread that calls compiled code is followed
    on its own (a worker pool serves several requests at once)."""

    def __init__(self, thread: threading.Thread) -> None:
        self.thread = thread
        self.boundary = False
        self.request: str | None = None
        self.open = False
        self.shape: list[int] | None = None
        self.start_ns = 0
        self.last_end_ns: int | None = None
        self.walls: list[float] = []
        #: The request's last timestep and the direction its timesteps move (-1, 0 unknown, 1).
        self.timestep: float | None = None
        self.direction = 0
        #: When the last outermost compiled call ended (monotonic ns, process CPU ns): a step
        #: made of several calls ends there, not when the next one begins.
        self.last_call: tuple[int, int] | None = None
        #: Set by `start` when it began a new request.
        self.new_request = False
        #: The call that opened the open step has returned (`call_done`).
        self.returned = False
        #: The step tracker's lane of the same thread (where the step is open).
        self.steps_lane: Any = None

    @property
    def idle(self) -> bool:
        return not self.open and not self.thread.is_alive()


class InferredSteps:
    """Step and request boundaries from outermost calls, in every thread that makes them."""

    def __init__(self, session: Session, name: str, rank: int) -> None:
        self.session = session
        self.name = name
        self.rank = rank
        self.silent = False
        #: A step stays open after its call (`call_done`) until the next step or request
        #: starts, and ends at the last call into compiled code before that: what the loop
        #: does between model calls (a scheduler step, a compiled helper and its compiles)
        #: belongs to the denoising step it follows.
        self.spans_calls = False
        self.lanes: list[InferredLane] = []
        self._local = threading.local()
        self._lock = threading.Lock()
        _ACTIVE.append(self)

    def lane(self) -> InferredLane:
        """The calling thread's lane."""
        lane: InferredLane | None = getattr(self._local, "lane", None)
        if lane is None:
            lane = InferredLane(threading.current_thread())
            with self._lock:
                self.lanes = [kept for kept in self.lanes if not kept.idle]
                self.lanes.append(lane)
            self._local.lane = lane
        return lane

    # The calling thread's lane, as the adapters read and set it.

    @property
    def boundary(self) -> bool:
        return self.lane().boundary

    @boundary.setter
    def boundary(self, value: bool) -> None:
        self.lane().boundary = value

    @property
    def last_call(self) -> tuple[int, int] | None:
        return self.lane().last_call

    @last_call.setter
    def last_call(self, value: tuple[int, int] | None) -> None:
        self.lane().last_call = value

    @property
    def new_request(self) -> bool:
        return self.lane().new_request

    @property
    def returned(self) -> bool:
        return self.lane().returned

    @property
    def stepping(self) -> bool:
        return self.lane().open

    def may_step(self) -> bool:
        """Whether a call now may be a step: nobody else drives the boundaries, no step is open
        in this thread."""
        if self.silent:
            return False
        session = self.session
        if session.adapter is not None and session.adapter_rank > self.rank:
            self.stand_down()
            return False
        steps = session.steps
        if steps is None:
            return False
        if session.adapter_rank < self.rank:  # a lower one gives way: what it had open closes
            session.announce_adapter(self.name, self.rank, self.stand_down)
        lane = self.lane()
        if steps.step_index is not None and not (
            lane.open and self.spans_calls and steps.request_id == lane.request
        ):
            return False
        return not (steps.request_id is not None and steps.request_id != lane.request)

    def start(self, shape: list[int] | None, timestep: float | None = None) -> bool:
        """Open a step (and a request when one is inferred to begin) in this thread; False when
        not ours. `timestep`: the call's timestep where it could be read (`timestep_of`)."""
        if not self.may_step():
            return False
        self.session.announce_adapter(self.name, self.rank, self.stand_down)
        if self.silent:
            return False
        lane = self.lane()
        if lane.open:  # the previous step, left open after its call: it ends at its last
            self.end_lane(lane, at_last_call=True)
        steps = self.session.steps
        now = time.monotonic_ns()
        if (
            lane.request is None
            or steps.request_id != lane.request
            or shape != lane.shape
            or lane.boundary
            or self._turned(lane, timestep)
            or (self._paused(lane, now) and not self._moved_on(lane, timestep))
        ):
            if lane.request is not None and steps.request_id == lane.request:
                steps.request_end()
            lane.request = steps.request_start(None, shape, None)
            lane.walls = []
            lane.timestep, lane.direction = None, 0
            lane.new_request = True
        else:
            lane.new_request = False
        if timestep is not None:
            if lane.timestep is not None and timestep != lane.timestep:
                lane.direction = 1 if timestep > lane.timestep else -1
            lane.timestep = timestep
        lane.boundary = False
        lane.shape = shape
        steps.step_start(None, shape)
        lane.steps_lane = steps.lane()
        lane.open = True
        lane.returned = False
        lane.start_ns = time.monotonic_ns()
        return True

    def end(self, at_last_call: bool = False) -> None:
        """Close the step this adapter opened in this thread (if it is still the open one);
        `at_last_call`: at the end of its last compiled call (a step made of several calls)."""
        self.end_lane(self.lane(), at_last_call)

    def end_lane(self, lane: InferredLane, at_last_call: bool = False) -> None:
        """Close the step open in `lane` (another thread's at exit or when standing down)."""
        if not lane.open:
            return
        lane.open = False
        steps = self.session.steps
        at = lane.last_call if at_last_call and lane.last_call is not None else None
        held = lane.steps_lane
        if held is not None and held.step_index is not None and held.request_id == lane.request:
            steps.step_end_in(held, at)
        now = at[0] if at is not None else time.monotonic_ns()
        lane.walls.append((now - lane.start_ns) / 1e9)
        lane.last_end_ns = now

    def call_done(self) -> None:
        """The call that opened the step returned: the step stays open (`spans_calls`)."""
        steps = self.session.steps
        lane = self.lane()
        lane.last_call = (
            steps.call_ended()
            if steps is not None
            else (time.monotonic_ns(), time.process_time_ns())
        )
        lane.returned = True

    def _turned(self, lane: InferredLane, timestep: float | None) -> bool:
        """The timestep moved against the request's direction: a new denoising loop began."""
        if timestep is None or lane.timestep is None or not lane.direction:
            return False
        return (timestep - lane.timestep) * lane.direction < 0

    def _moved_on(self, lane: InferredLane, timestep: float | None) -> bool:
        """The timestep moved on in the request's direction: the same denoising loop, however
        long the pause (a worker waiting while another thread compiles, or for a lock)."""
        if timestep is None or lane.timestep is None or timestep == lane.timestep:
            return False
        return not self._turned(lane, timestep)

    def _paused(self, lane: InferredLane, now: int) -> bool:
        if lane.last_end_ns is None or not lane.walls:
            return False
        gap = (now - lane.last_end_ns) / 1e9
        return gap > PAUSE_FLOOR_S and gap > PAUSE_FACTOR * statistics.median(lane.walls)

    def stand_down(self) -> None:
        """Another adapter drives the boundaries from now on: close what is open in every
        thread, then stay out."""
        if self.silent:
            return
        self.silent = True
        steps = self.session.steps
        if steps is None:
            return
        for lane in list(self.lanes):
            held = lane.steps_lane
            if held is None or lane.request is None or held.request_id != lane.request:
                continue
            if lane.open:
                lane.open = False
                steps.step_end_in(held)
            steps.request_end_in(held)


def compiling_here(torch: Any) -> Callable[[], bool]:
    """`torch.compiler.is_compiling()` for the calling thread only.

    torch 2.13 holds the flag True for the whole process while one thread compiles (a compile
    session, convert_frame's compile_inner), so a second thread's eager call would read as a
    traced one and its step be lost. A compile holds Dynamo's compile lock (an RLock) in the
    thread that compiles: the flag counts only where this thread owns it. Where the lock cannot
    be read, the flag is taken as it is."""
    is_compiling = torch.compiler.is_compiling
    # True only while Dynamo traces (it folds the call to a constant); False in eager code. So
    # under tracing `here` is the constant True and Dynamo never reaches the lock check below
    # (tracing `RLock._is_owned` would break the graph: one more frame for the program).
    is_tracing = getattr(torch.compiler, "is_dynamo_compiling", None) or is_compiling

    def here() -> bool:
        if is_tracing():
            return True
        if not is_compiling():
            return False
        convert_frame = sys.modules.get("torch._dynamo.convert_frame")
        owned = getattr(getattr(convert_frame, "compile_lock", None), "_is_owned", None)
        if owned is None:
            return True
        try:
            return bool(owned())
        except Exception:  # noqa: BLE001 - an RLock without it: the flag as it is
            return True

    # Called from hooks that run inside a compiled module's call: as torch's own is_compiling
    # is, this is no frame for Dynamo to examine (it would count, and compile, one more frame).
    skip_code(torch, here.__code__)
    return here


def outside_dynamo(
    torch: Any, body: Callable[..., Any], session: Session | None = None
) -> Callable[..., Any]:
    """`body` as a function that Dynamo neither compiles nor lets compile what it calls.

    A hook on a module whose call Dynamo's frame callback covers (`torch.compile(model)` calls
    the model's own hooks inside it, `model.compile()` too) would otherwise be examined as a
    frame, and everything it calls with it. The returned shim is marked for Dynamo to skip, and
    runs `body` under `torch._dynamo.disable`; while Dynamo traces (the module called inside a
    compiled graph) the shim does nothing at all, nor while `session` is paused (Session.pause;
    the switch is read after the tracing test, never by Dynamo). Until the program imports
    Dynamo nothing can be compiling, so `body` runs as it is: diag never imports Dynamo first.
    """
    is_compiling = compiling_here(torch)
    disabled: list[Callable[..., Any]] = []

    def shim(*args: Any, **kwargs: Any) -> Any:
        if is_compiling() or (session is not None and session.paused):
            return None
        if not disabled:
            return body(*args, **kwargs)
        return disabled[0](*args, **kwargs)

    def disable(module: Any) -> None:
        # Made when Dynamo is imported, never inside a call: building the wrapper runs
        # functools frames that Dynamo's frame callback would examine (and count) mid-model.
        disabled.append(module.disable(body))

    from ..importhook import on_import

    on_import("torch._dynamo", disable)
    skip_code(torch, shim.__code__)
    return shim


_SKIPPED: set[Any] = set()
#: Codes to mark for Dynamo to skip once the program imports it.
_PENDING: list[Any] = []


def skip_code(torch: Any, code: Any) -> None:
    """Never let Dynamo take `code` as a frame to compile (diag's wrappers around compiled code).
    Once per code object: the closures made here share theirs. Before the program imports
    Dynamo the code is marked the moment it does (collectors/importhook.py), before anything
    can be compiled."""
    if code in _SKIPPED:
        return
    _SKIPPED.add(code)
    if "torch._dynamo" in sys.modules:
        _mark(code)
        return
    if not _PENDING:
        from ..importhook import on_import

        on_import("torch._dynamo", _mark_pending)
    _PENDING.append(code)


def _mark(code: Any) -> None:
    from torch._dynamo.eval_frame import skip_code as dynamo_skip_code

    dynamo_skip_code(code)


def _mark_pending(module: Any) -> None:
    while _PENDING:
        _mark(_PENDING.pop())


def first_tensor_shape(torch: Any, args: Any, kwargs: Any, names: tuple[str, ...]) -> Any:
    """The shape of a call's input: the named keyword arguments first, then the first tensor."""
    tensor = torch.Tensor
    for name in names:
        value = kwargs.get(name)
        if isinstance(value, tensor):
            return value.shape
    for value in args:
        if isinstance(value, tensor):
            return value.shape
    for value in kwargs.values():
        if isinstance(value, tensor):
            return value.shape
    return None


#: Keyword arguments that hold a denoising call's timestep, in the order they are looked for.
TIMESTEP_NAMES = ("timestep", "timesteps", "t", "sigma")
#: struct formats of the dtypes a timestep is read from (bfloat16 is float32's upper half).
_FORMATS = {
    "float32": "<f",
    "float64": "<d",
    "float16": "<e",
    "bfloat16": "bf16",
    "int64": "<q",
    "int32": "<i",
    "int16": "<h",
    "int8": "<b",
    "uint8": "<B",
}


def timestep_of(torch: Any, kwargs: dict[str, Any]) -> float | None:
    """The call's timestep as a number: a keyword's int or float, or the first element of a plain
    dense CPU tensor, read from its memory (no operator runs, so neither the profiler nor the
    program sees the read). None when there is none or reading it could cost the program
    anything: a tensor on an accelerator (a device sync), a subclass, an unusual dtype."""
    for name in TIMESTEP_NAMES:
        value = kwargs.get(name)
        if value is None:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if type(value) is torch.Tensor:
            return _first_element(torch, value)
        return None
    return None


def _first_element(torch: Any, tensor: Any) -> float | None:
    fmt = _FORMATS.get(str(tensor.dtype).removeprefix("torch."))
    if (
        fmt is None
        or tensor.device.type != "cpu"
        or tensor.layout is not torch.strided
        or tensor.numel() == 0
    ):
        return None
    address = tensor.data_ptr()
    if not address:
        return None
    if fmt == "bf16":
        raw = ctypes.string_at(address, 2)
        return float(struct.unpack("<f", b"\0\0" + raw)[0])
    return float(struct.unpack(fmt, ctypes.string_at(address, struct.calcsize(fmt)))[0])
