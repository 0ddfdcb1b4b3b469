"""What the recorded calls say about input shapes: the values each argument's dims took in the
calls diag sampled (`call_shapes`; for MagiCompiler targets, whose later calls skip Dynamo,
magi's guard checks), and which argument dim a Dynamo size source names.

One reading for the dynamic-shapes analyzer, the TUI's Compiles detail and the report.
"""

from __future__ import annotations

import re
from collections import defaultdict

from diag.trace.numerals import parse_int
from diag.trace.run import Frame, RunData

#: (pid, frame) -> (argument, dim) -> the sizes sampled calls had there.
Sampled = dict[tuple[int, Frame], dict[tuple[str, int], set[int]]]

_SIZE_SOURCE = re.compile(r"^L\['(?P<arg>[^']+)'\]\.size\(\)\[(?P<dim>\d+)\]$")
_MAGI_INPUT = re.compile(r"^\(\((?P<shape>[\d, ]*)\),")


def size_source(source: str) -> tuple[str, int] | None:
    """`L['x'].size()[1]` -> ("x", 1); None for anything that is not an argument's dim."""
    match = _SIZE_SOURCE.match(source)
    dim = parse_int(match.group("dim")) if match else None
    return (match.group("arg"), dim) if match and dim is not None else None


def as_compiled(frame: Frame) -> Frame:
    """A magi target (`Block.forward`, its qualname) as Dynamo names the code it compiles
    (`forward`, the code's co_name): the same code at the same line, so that magi's declared
    dims and sampled calls meet Dynamo's compiles and symbols of it."""
    return Frame(frame.name.rsplit(".", 1)[-1], frame.file, frame.line, frame.called_from)


def _magi_shape(text: object) -> list[int] | None:
    """A magi guard check's input, `((1, 4608, 1536), 'torch.bfloat16', 'cuda:0')`: its shape."""
    match = _MAGI_INPUT.match(text) if isinstance(text, str) else None
    if match is None:
        return None
    parts = [p for p in match.group("shape").replace(" ", "").split(",") if p]
    dims = [parse_int(part) for part in parts]
    return None if None in dims else [d for d in dims if d is not None]


def magi_calls(run: RunData) -> list[tuple[int, Frame, dict[str, list[int]], int]]:
    """(pid, target, argument shapes, call number) of each fast-path call magi's guard checks
    sampled (collectors/magi.py); the target named as Dynamo names its code (`as_compiled`)."""
    found = []
    for event in run.of("magi_guard_check"):
        target = Frame.from_event(event.data.get("target"))
        frame = as_compiled(target) if target is not None else None
        inputs = event.data.get("inputs")
        call = event.data.get("call")
        if frame is None or not isinstance(inputs, dict):
            continue
        shapes = {str(k): shape for k, v in inputs.items() if (shape := _magi_shape(v))}
        found.append((event.pid, frame, shapes, call if isinstance(call, int) else 0))
    return found


def sampled_dims(run: RunData) -> Sampled:
    """(pid, frame) -> (argument, dim) -> the sizes the sampled calls had there."""
    seen: Sampled = {}
    for event in run.of("call_shapes"):
        frame = Frame.from_event(event.data.get("frame"))
        signatures = event.data.get("signatures")
        if frame is None or not isinstance(signatures, list):
            continue
        dims = seen.setdefault((event.pid, frame), defaultdict(set))
        for signature in signatures:
            args = signature.get("args") if isinstance(signature, dict) else None
            for name, shape in (args or {}).items():
                for index, size in enumerate(shape if isinstance(shape, list) else []):
                    if isinstance(size, int):
                        dims[(str(name), index)].add(size)
    for pid, frame, shapes, _ in magi_calls(run):
        dims = seen.setdefault((pid, frame), defaultdict(set))
        for name, shape in shapes.items():
            for index, size in enumerate(shape):
                dims[(name, index)].add(size)
    return seen
