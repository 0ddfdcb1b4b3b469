"""diag.trace.guards: Dynamo guard-failure texts parsed into kind, source and values.

Texts marked "torch 2.13" were copied verbatim from recompile_reasons artifacts of real runs on
torch 2.13.0+cpu (the repo's fixtures and small scripts; a script under /tmp shows torch's
shortened paths such as `mp/gw/gen/scen.py`). Texts marked otherwise come from torch's sources
or older torch versions.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.trace.guards import (
    GuardFailure,
    describe_subject,
    explain_stride_guard,
    guard_subject,
    mark_dynamic_hint,
    parse_guard_failure,
    parse_recompile_reasons,
)

SHARED_TRACES = Path(__file__).resolve().parents[1] / "data" / "shared" / "torch_trace"

HINT_INT = (
    " (HINT: torch.compile considers integer attributes of the nn.Module to be static. If you are"
    " observing recompilation, you might want to make this integer dynamic using"
    " torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert this integer into a"
    " tensor.)"
)

# torch 2.13, `python -m diag.fixtures --compile` with plants.
QWEN_PASS_NAME = (
    "0/1: block.state.pass_name == 'cond'                          "
    '# if self.state.pass_name == "uncond":  # the comparison is what Dynamo guards on'
    "  # fixtures/models/qwen.py:76 in churn_read\n"
    "User stack trace:\n"
    '  File "/work/main/fixtures/models/qwen.py", line 127, in qwen_block_forward\n'
    "    return block(img, txt, t_mod, (freqs_f, freqs_h, freqs_w))"
    "  # type: ignore[no-any-return]\n"
    '  File "/work/main/fixtures/models/qwen.py", line 114, in forward\n'
    "    img, txt = self.attn_phase(img, txt, t_mod, freqs)\n"
    '  File "/work/main/fixtures/models/qwen.py", line 92, in attn_phase\n'
    "    joint = joint.flatten(-2) * self.planted_scale()\n"
    '  File "/work/main/fixtures/models/common.py", line 60, in planted_scale\n'
    '    scale = self.churn_read() if state.has("guard-churn") else 1.0\n'
    '  File "/work/main/fixtures/models/qwen.py", line 76, in churn_read\n'
    '    if self.state.pass_name == "uncond":  # the comparison is what Dynamo guards on'
)
LTX_SKIP_LAYERS = (
    "1/1: self.skip_layers == {3}                                  "
    "# stg = self.stg_scale if self.skip_layers else 0.0  # fixtures/models/ltx.py:117 in combine\n"
    "User stack trace:\n"
    '  File "/work/main/fixtures/models/ltx.py", line 117, in combine\n'
    "    stg = self.stg_scale if self.skip_layers else 0.0"
)
BLOCK_IDX = (
    "0/0: block.block_idx == 0                                     "
    "# scale *= state.layer_scales[self.block_idx]  # fixtures/models/common.py:66 in planted_scale"
    + HINT_INT
    + "\nUser stack trace:\n"
    '  File "/work/main/fixtures/models/ltx.py", line 43, in ltx_block_forward\n'
    "    return (block(x, context, t_mod, (freqs_f, freqs_h, freqs_w), attn_gate),)\n"
    '  File "/work/main/fixtures/models/ltx.py", line 28, in forward\n'
    "    x = self.self_attn_phase(x, t_mod, freqs, gate_scale=attn_gate)\n"
    '  File "/work/main/fixtures/models/wan.py", line 54, in self_attn_phase\n'
    "    y = self.self_attn(modulate(self.norm1(x), shift, scale), freqs) * self.planted_scale()\n"
    '  File "/work/main/fixtures/models/common.py", line 66, in planted_scale\n'
    "    scale *= state.layer_scales[self.block_idx]"
)
STATE_CNT = (
    "0/7: block.state.cnt == 7                                     "
    '# if state.has("recompile-limit") and state.cnt >= 0:'
    "  # fixtures/models/common.py:61 in planted_scale" + HINT_INT
)
# torch 2.13, shared/data/torch_trace/torch213_graph_break_and_limit.log (a single raw reason).
TOY_STEP = (
    "0/0: self.step == 0                                           "
    "# if self.step < 2:       # python int compare -> guard on self.step"
    "  # A/toy_dit.py:27 in forward" + HINT_INT + "\nUser stack trace:\n"
    '  File "/work/research/A/toy_dit_infer.py", line 9, in forward\n'
    "    x = super().forward(x, t)\n"
    '  File "/work/research/A/toy_dit.py", line 27, in forward\n'
    "    if self.step < 2:       # python int compare -> guard on self.step"
)
TOY_USE_CFG = (
    "0/4: self.use_cfg == False                                    "
    "# if self.use_cfg:  # A/toy_dit.py:32 in forward\n"
    "User stack trace:\n"
    '  File "/work/research/A/toy_dit.py", line 32, in forward\n'
    "    if self.use_cfg:"
)
BACKEND_MATCH = (
    "0/0: BACKEND_MATCH failure: torch.compile detected different backend callables. Cached"
    " backend: _TorchCompileWrapper(compiler='<lambda>', dynamic=None) (id=0x7f63e3e71e90). New"
    " backend: _TorchCompileWrapper(compiler='<lambda>', dynamic=None) (id=0x7f63e3f38450). If"
    " this is unexpected, wrap your backend in functools.partial (or reuse the same cached"
    " backend) to avoid creating a new backend function each time. More details:"
    " https://github.com/pytorch/pytorch/issues/168373"
)

SCEN = "# mp/gw/gen/scen.py"


def case(
    text: str,
    kind: str,
    source: str | None,
    expected: str | None = None,
    actual: str | None = None,
    location: str | None = None,
    *,
    cid: str | None = "0/0",
    id: str,
) -> object:
    return pytest.param(text, (cid, kind, source, expected, actual, location), id=id)


CASES = [
    # Tensor checks (the C++ TensorCheck messages).
    case(
        "0/13: tensor 'x' size mismatch at index 0. expected 15, actual 16",
        "tensor-size",
        "x",
        "15",
        "16",
        cid="0/13",
        id="tlparse-size",
    ),
    case(
        "0/0: tensor 'x' size mismatch at index 1. expected 32, actual 48",
        "tensor-size",
        "x",
        "32",
        "48",
        id="wan-warmup-height",
    ),
    case(
        "0/1: tensor 'freqs_w' size mismatch at index 0. expected 4, actual 6",
        "tensor-size",
        "freqs_w",
        "4",
        "6",
        cid="0/1",
        id="unwarmed-width",
    ),
    case(
        "0/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1",
        "tensor-stride",
        "x",
        "4",
        "1",
        id="stride",
    ),
    case(
        "0/0: tensor 'x' dtype mismatch. expected Float, actual BFloat16",
        "tensor-dtype",
        "x",
        "Float",
        "BFloat16",
        id="dtype",
    ),
    case(
        "0/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",
        "tensor-requires-grad",
        "x",
        "requires_grad=0",
        None,
        id="requires-grad",
    ),
    case(
        "0/0: tensor 'x' rank mismatch. expected 1, actual 2",
        "tensor-other",
        "x",
        "1",
        "2",
        id="rank",
    ),
    case(
        "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect,"
        " ADInplaceOrView, AutogradCPU), actual DispatchKeySet(Meta, BackendSelect,"
        " ADInplaceOrView, AutogradMeta)",
        "tensor-device",
        "x",
        "DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)",
        "DispatchKeySet(Meta, BackendSelect, ADInplaceOrView, AutogradMeta)",
        id="dispatch-keys-new-device",
    ),
    case(
        "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect,"
        " ADInplaceOrView, AutogradCPU), actual DispatchKeySet(CPU, BackendSelect,"
        " ADInplaceOrView)",
        "tensor-other",
        "x",
        "DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)",
        "DispatchKeySet(CPU, BackendSelect, ADInplaceOrView)",
        id="dispatch-keys-inference-tensor",
    ),
    case(  # torch's own test (test_torchinductor.py), before strip_local_scope existed
        "tensor 'L['x']' Tensor device index mismatch. Expected device index to be 0, actual 1",
        "tensor-device",
        "x",  # L['x'] read as later releases write it
        "0",
        "1",
        cid=None,
        id="device-index",
    ),
    case(
        "0/0: expected type of 'o.t' to be a tensor type, ' but found <class 'NoneType'>",
        "type",
        "o.t",
        "tensor",
        "<class 'NoneType'>",
        id="not-a-tensor",
    ),
    case(
        '0/0: Duplicate tensors found: ["x", "y"]',
        "tensor-other",
        '["x", "y"]',
        id="aliasing",
    ),
    # Python state read inside the frame.
    case(
        QWEN_PASS_NAME,
        "python-value",
        "block.state.pass_name",
        "'cond'",
        None,
        "fixtures/models/qwen.py:76",
        cid="0/1",
        id="qwen-pass-name",
    ),
    case(
        LTX_SKIP_LAYERS,
        "python-value",
        "self.skip_layers",
        "{3}",
        None,
        "fixtures/models/ltx.py:117",
        cid="1/1",
        id="ltx-skip-layers-set",
    ),
    case(
        BLOCK_IDX,
        "python-value",
        "block.block_idx",
        "0",
        None,
        "fixtures/models/common.py:66",
        id="cache-bloat-block-idx",
    ),
    case(
        STATE_CNT,
        "python-value",
        "block.state.cnt",
        "7",
        None,
        "fixtures/models/common.py:61",
        cid="0/7",
        id="recompile-limit-counter",
    ),
    case(
        TOY_STEP,
        "python-value",
        "self.step",
        "0",
        None,
        "A/toy_dit.py:27",
        id="hash-in-user-code-line",
    ),
    case(
        TOY_USE_CFG,
        "python-value",
        "self.use_cfg",
        "False",
        None,
        "A/toy_dit.py:32",
        cid="0/4",
        id="bool-attribute",
    ),
    case(
        "0/0: s == 'a'                                                 "
        '# return x * 2 if s == "a" else x  ' + SCEN + ":135 in fn",
        "python-value",
        "s",
        "'a'",
        None,
        "mp/gw/gen/scen.py:135",
        id="str-arg",
    ),
    case(
        "0/0: d['a'] == 1                                              "
        '# def fn(x, d): return x * d["a"]  # mp/gw/gen/scen2.py:42 in fn',
        "python-value",
        "d['a']",
        "1",
        None,
        "mp/gw/gen/scen2.py:42",
        id="dict-item",
    ),
    case(
        "0/0: o is None                                                "
        "# def fn(x, o): return x + 1 if o is None else x + o  " + SCEN + ":57 in fn",
        "python-value",
        "o",
        "None",
        None,
        "mp/gw/gen/scen.py:57",
        id="is-none",
    ),
    case(
        "0/0: 6 <= n  # if n > 5: return x * n  # mp/gw/gen/scen2.py:27 in fn"
        " (_dynamo/variables/tensor.py:2606 in evaluate_expr)",
        "python-value",
        "n",
        "6 <= n",
        None,
        "mp/gw/gen/scen2.py:27",
        id="dynamic-int",
    ),
    # Identity and type.
    case(
        "0/0: ___check_obj_id(g.__code__, 140067635235520), type=<class 'code'>"
        "  # def fn(x, g): return g(x)  " + SCEN + ":35 in fn",
        "object-identity",
        "g.__code__",
        "140067635235520",
        None,
        "mp/gw/gen/scen.py:35",
        id="obj-id-function-arg",
    ),
    case(
        "0/0: ___check_obj_id(G['GF'].__code__, 140067636747216), type=<class 'code'>"
        "  # def fn(x): return GF(x)  " + SCEN + ":42 in fn",
        "object-identity",
        "G['GF'].__code__",
        "140067636747216",
        None,
        "mp/gw/gen/scen.py:42",
        id="obj-id-global",
    ),
    case(
        "0/0: ___check_type_id(self._modules['b'], 94137755696624),"
        " type=<class '__main__.s_module_swap.<locals>.B'>"
        "  # def forward(self, x): return self.b(x)  # mp/gw/gen/scen2.py:83 in forward"
        " (HINT: type s_module_swap.<locals>.B)",
        "type",
        "self._modules['b']",
        "<class '__main__.s_module_swap.<locals>.B'>",
        None,
        "mp/gw/gen/scen2.py:83",
        id="type-id-submodule-swapped",
    ),
    case(
        BACKEND_MATCH,
        "object-identity",
        "backend",
        "_TorchCompileWrapper(compiler='<lambda>', dynamic=None) (id=0x7f63e3e71e90)",
        "_TorchCompileWrapper(compiler='<lambda>', dynamic=None) (id=0x7f63e3f38450)",
        id="backend-match",
    ),
    case(  # torch/_dynamo/guards.py CheckFunctionManager.invalidate
        "0/2: Cache line invalidated because self got deallocated",
        "object-identity",
        "self",
        None,
        "deallocated",
        cid="0/2",
        id="invalidated",
    ),
    # Containers.
    case(
        "0/1: len(block.state.config) != 3",
        "container-length",
        "block.state.config",
        "3",
        cid="0/1",
        id="wan-config-grows",
    ),
    case(
        "0/0: len(l) == 2                                              "
        "# def fn(x, l): return x + sum(l)  " + SCEN + ":74 in fn",
        "container-length",
        "l",
        "2",
        None,
        "mp/gw/gen/scen.py:74",
        id="list-length",
    ),
    case(
        "0/0: list(dict.keys(d))[1] == 'b'                             "
        "# return x + sum(d.values())  " + SCEN + ":62 in fn",
        "container-keys",
        "d",
        "'b'",
        None,
        "mp/gw/gen/scen.py:62",
        id="dict-key-order",
    ),
    case(
        "0/0: not ___dict_contains('z', G['GD'])                            "
        '# if "z" in GD:  ' + SCEN + ":68 in fn",
        "container-keys",
        "G['GD']",
        "not 'z'",
        None,
        "mp/gw/gen/scen.py:68",
        id="dict-contains",
    ),
    case(
        "0/0: set.__contains__(g.skip, 1)                              "
        "# return x * 2 if 1 in g.skip else x  # mp/gw/gen/scen2.py:50 in fn",
        "container-keys",
        "g.skip",
        "1",
        None,
        "mp/gw/gen/scen2.py:50",
        id="set-membership",
    ),
    case(
        "0/0: not hasattr(o, 'a')                                      "
        '# if hasattr(o, "a"): return x + 1  # mp/gw/gen/scen2.py:21 in fn',
        "container-keys",
        "o",
        "not 'a'",
        None,
        "mp/gw/gen/scen2.py:21",
        id="hasattr",
    ),
    case(  # older torch, G-scope dict guard
        "list(dict.keys(G['cfg'])) == ['a', 'b']",
        "container-keys",
        "G['cfg']",
        "['a', 'b']",
        cid=None,
        id="dict-keys-list",
    ),
    # Global state.
    case(
        "0/0: GLOBAL_STATE changed: grad_mode ",
        "global-state",
        "grad_mode",
        id="grad-mode",
    ),
    case(
        "0/0: GLOBAL_STATE changed: autocast(cpu)_enabled ",
        "global-state",
        "autocast(cpu)_enabled",
        id="autocast",
    ),
    case(
        "0/0: ___check_torch_function_mode_stack()",
        "global-state",
        "torch_function_mode_stack",
        id="torch-function-mode",
    ),
    case(  # the guard's code part in torch/_dynamo/guards.py
        "___check_global_state() against {'grad_enabled': True}",
        "global-state",
        "global_state",
        "{'grad_enabled': True}",
        cid=None,
        id="global-check",
    ),
    # Symbolic shape guards.
    case(
        "0/1: 2 <= x.size()[0]  # def fn(x): return x * 2  " + SCEN + ":102 in fn (user code"
        " shown is first use of this value--the guard itself is not due user code but due to 0/1"
        " specialization in the framework; to avoid specialization try"
        " torch._dynamo.decorators.mark_unbacked(tensor, dim))",
        "tensor-size",
        "x",
        "2 <= x.size()[0]",
        None,
        "mp/gw/gen/scen.py:102",
        cid="0/1",
        id="zero-one-specialization",
    ),
    case(
        "0/0: y.size()[0] == x.size()[0]  # duck sizing added this equality because these"
        " variables had the same size 4 (to avoid this specialization, set"
        " torch.fx.experimental._config.use_duck_shape = False)",
        "tensor-size",
        "y",
        "x.size()[0]",
        id="duck-sizing",
    ),
    case(  # shared/FACTS.md: diffusers, a view's _base
        "rotary_emb[0]._base.stride()[0] == 192*rotary_emb[0]._base.size()[1]"
        "  # (unknown source L['rotary_emb'][0]._base.stride()[0], please file a bug)",
        "tensor-stride",
        "rotary_emb[0]._base",
        "192*rotary_emb[0]._base.size()[1]",
        cid=None,
        id="view-base-stride",
    ),
    # Not guards: an error while evaluating one, and a torch bug report.
    case(
        "'NoneType' object has no attribute 'size'",
        "unknown",
        None,
        cid=None,
        id="eval-error",
    ),
    case(
        "0/0: Unexpected recompilation: runtime guards failed even though they passed during"
        " recompilation-reason analysis.",
        "unknown",
        None,
        id="unexpected",
    ),
]


@pytest.mark.parametrize(("text", "want"), CASES)
def test_parse_guard_failure(text: str, want: tuple[str | None, ...]) -> None:
    got = parse_guard_failure(text)
    assert (
        got.compile_id,
        got.kind,
        got.source,
        got.expected,
        got.actual,
        got.user_location,
    ) == want
    assert got.raw == text


def test_stack_trace_stays_in_raw_only() -> None:
    got = parse_guard_failure(QWEN_PASS_NAME)
    assert "User stack trace" in got.raw
    fields = (got.source, got.expected, got.actual, got.user_location)
    assert not any(field and ("\n" in field or "File" in field) for field in fields)


def test_single_reason_payload_is_raw_text() -> None:
    [got] = parse_recompile_reasons(TOY_STEP)
    assert (got.compile_id, got.kind, got.source) == ("0/0", "python-value", "self.step")
    assert got.raw == TOY_STEP


def test_several_reasons_payload_is_a_json_list() -> None:
    payload = json.dumps(
        [
            "0/4: self.use_cfg == False                                    # if self.use_cfg:"
            "  # A/toy_dit.py:32 in forward",
            "0/3: tensor 'x' size mismatch at index 1. expected 16, actual 32",
        ],
        indent=0,
    )
    got = parse_recompile_reasons(payload)
    assert [(g.compile_id, g.kind, g.source) for g in got] == [
        ("0/4", "python-value", "self.use_cfg"),
        ("0/3", "tensor-size", "x"),
    ]


@pytest.mark.parametrize(
    ("payload", "kinds"),
    [
        pytest.param("", [], id="empty"),
        pytest.param("  \n", [], id="blank"),
        pytest.param("[]", [], id="empty-list"),
        pytest.param('"0/0: len(l) == 2"', ["container-length"], id="json-string"),
        pytest.param("[1, null]", ["unknown", "unknown"], id="list-of-non-strings"),
        pytest.param("[0/0: tensor 'x'", ["unknown"], id="bracket-not-json"),
        pytest.param('["0/0: len(l) == 2"', ["unknown"], id="truncated-list"),
        pytest.param("{}", ["unknown"], id="json-object"),
        pytest.param("[" * 100_000, ["unknown"], id="nested-too-deep"),
    ],
)
def test_odd_payloads(payload: str, kinds: list[str]) -> None:
    assert [g.kind for g in parse_recompile_reasons(payload)] == kinds


def test_garbage_never_raises() -> None:
    rng = random.Random(20241129)
    pieces = [
        "0/0: ",
        "tensor '",
        "' ",
        "size mismatch",
        " at index ",
        "expected ",
        ", actual ",
        "len(",
        ")",
        " == ",
        " != ",
        "  # ",
        ":12 in f",
        " (HINT: ",
        "___check_obj_id(",
        "[",
        "]",
        "{",
        '"',
        "'",
        "\n",
        "User stack trace:",
        "\x00",
        "é",
        "\t",
        "GLOBAL_STATE changed:",
        ".size()",
        ".stride()",
        " <= ",
        "not ",
        "___dict_contains(",
        "is None",
        "#",
        ",",
    ]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(2000)]
    texts += ["".join(chr(rng.randint(0, 0x2FFF)) for _ in range(80)) for _ in range(200)]
    texts += [text[: rng.randint(0, len(text))] for text in (BLOCK_IDX, BACKEND_MATCH) * 100]
    for text in texts:
        for got in (parse_guard_failure(text), *parse_recompile_reasons(text)):
            assert isinstance(got, GuardFailure)
        assert parse_guard_failure(text).raw == text


def test_fast_enough_for_a_collector() -> None:
    texts = [QWEN_PASS_NAME, BLOCK_IDX, LTX_SKIP_LAYERS, BACKEND_MATCH] + [
        f"0/{i}: tensor 'x' size mismatch at index 1. expected {i}, actual {i + 1}"
        for i in range(6)
    ]
    reasons = (texts * 1000)[:10_000]
    start = time.perf_counter()
    for text in reasons:
        parse_guard_failure(text)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"10,000 reasons took {elapsed:.2f} s"


def test_import_loads_no_torch() -> None:
    code = (
        "import sys, diag.trace.guards; "
        "print(sorted(m for m in sys.modules if m.startswith('torch')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def _recompile_payloads(path: Path) -> Iterator[str]:
    """The payload of every `recompile_reasons` artifact in a TORCH_TRACE log: a glog prefix, a
    JSON envelope, then payload lines that start with a tab."""
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if "recompile_reasons" not in line:
            continue
        start = line.find("] {")
        try:
            envelope = json.loads(line[start + 2 :]) if start >= 0 else None
        except ValueError:
            continue
        artifact = envelope.get("artifact") if isinstance(envelope, dict) else None
        if not isinstance(artifact, dict) or artifact.get("name") != "recompile_reasons":
            continue
        body = []
        while i < len(lines) and lines[i].startswith("\t"):
            body.append(lines[i][1:])
            i += 1
        yield "\n".join(body)


def test_every_recompile_reason_in_the_shared_traces() -> None:
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"shared traces not found at {SHARED_TRACES}")
    parsed: list[GuardFailure] = []
    payloads = 0
    for log in sorted(SHARED_TRACES.glob("*.log")):
        for payload in _recompile_payloads(log):
            payloads += 1
            parsed.extend(parse_recompile_reasons(payload))
    assert payloads >= 20 and len(parsed) >= payloads
    unknown = [g.raw for g in parsed if g.kind == "unknown"]
    assert len(unknown) <= 0.1 * len(parsed), "unclassified:\n" + "\n".join(unknown)
    assert all(g.compile_id is not None for g in parsed)


# --- what the guard's source is, in the program's terms -----------------------------------------

# Seen on the real LightX2V (tests/data/lightx2v): Wan's block reads its RoPE table off `self`.
COS_SIN = "self.cos_sin._base.stride()[0] == 64*self.cos_sin._base.size()[1]"


@pytest.mark.parametrize(
    ("source", "tensor", "owner", "attribute", "via_base"),
    [
        ("self.cos_sin._base", "self.cos_sin", "self", "cos_sin", True),
        ("L['self'].cos_sin._base", "self.cos_sin", "self", "cos_sin", True),
        ("self.transformer.freqs", "self.transformer.freqs", "self.transformer", "freqs", False),
        ("rotary_emb[0]._base", "rotary_emb[0]", None, None, True),
        ("L['x']", "x", None, None, False),
        ("args[0]", "args[0]", None, None, False),
    ],
)
def test_guard_subject_names_owner_and_attribute(
    source: str, tensor: str, owner: str | None, attribute: str | None, via_base: bool
) -> None:
    subject = guard_subject(source)
    assert subject is not None
    assert (subject.tensor, subject.owner, subject.attribute, subject.via_base) == (
        tensor,
        owner,
        attribute,
        via_base,
    )
    assert subject.is_argument == (owner is None)


@pytest.mark.parametrize("source", [None, "", "len(self.config)", "___dict_version(G)"])
def test_guard_subject_is_none_for_what_is_not_a_path(source: str | None) -> None:
    assert guard_subject(source) is None


def test_an_attribute_is_not_called_an_input() -> None:
    subject = guard_subject("self.cos_sin._base")
    assert subject is not None
    text = describe_subject(subject, "block_runner")
    assert text.startswith("`self.cos_sin` is the attribute `cos_sin` of `self`")
    assert "block_runner reads, not an argument of the call" in text
    assert "Dynamo guards the tensor it was cut from, `self.cos_sin._base`" in text
    hint = mark_dynamic_hint("self.cos_sin._base", "block_runner")
    assert "on the tensor `self.cos_sin` is a view of (`self.cos_sin._base`)" in hint
    assert "where that tensor is created" in hint
    assert hint.endswith("(`cos_sin` of `self`, not an input of block_runner)")
    assert "input that carries" not in hint


def test_mark_dynamic_hint_for_arguments_and_attributes() -> None:
    assert mark_dynamic_hint("L['x']", "forward") == (
        "torch._dynamo.mark_dynamic(x, dim) on the argument before the call"
    )
    assert mark_dynamic_hint("self.freqs", "forward") == (
        "torch._dynamo.mark_dynamic(self.freqs, dim) where `self.freqs` is assigned "
        "(`freqs` of `self`, not an input of forward)"
    )
    assert "on the tensor the guard names" in mark_dynamic_hint(None)


def test_stride_guard_explained_as_fixed_later_dims() -> None:
    text = explain_stride_guard(COS_SIN)
    assert text is not None
    assert text.startswith("`self.cos_sin._base` is contiguous, so its dim-0 stride is its dim-1")
    assert "the constant 64: dim 1 may vary, but dim 2 and after are fixed" in text
    assert "width x channels = 64" in text
    # Also diffusers' rotary table (FACTS), and only the adjacent-dims shape of the guard.
    assert explain_stride_guard(
        "rotary_emb[0]._base.stride()[0] == 24*rotary_emb[0]._base.size()[1]"
    )
    assert explain_stride_guard("x.stride()[0] == 24*x.size()[2]") is None
    assert explain_stride_guard("x.size()[0] == 4") is None


def test_a_torch_26_tensor_guard_names_the_local_as_later_releases_do() -> None:
    """torch 2.6 wrote `tensor 'L['x']' size mismatch` where 2.13 writes `tensor 'x' ...`
    (text copied from a real recording on torch 2.6.0); both name the argument `x`."""
    old = parse_guard_failure("0/0: tensor 'L['x']' size mismatch at index 0. expected 4, actual 8")
    new = parse_guard_failure("0/0: tensor 'x' size mismatch at index 0. expected 4, actual 8")
    assert (old.kind, old.source) == (new.kind, new.source) == ("tensor-size", "x")
    nested = parse_guard_failure(
        "tensor 'L['self'].w' size mismatch at index 0. expected 4, actual 8"
    )
    assert nested.source == "L['self'].w"
