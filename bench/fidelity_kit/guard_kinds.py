"""Guard-kind families (issue 35): one generated program section per guard kind the CPU can
produce, each with a planted live recompile of that kind and the vocabulary's fix for it.

A section is `def run_<family>(fixed, seed)`: it compiles its own function, warms it up, calls
`serve_start()`, then serves; with `fixed` it applies the fix diag prints for that kind
(diag/trace/guard_vocabulary.py, the fix whose `verified_by` names the family). The program
records
torch's own guard failures (`torch._dynamo.utils.guard_failures`, the oracle) per section and
the serving outputs, and never imports diag.

The harness (`bench/fidelity.py --guard-kinds`) runs the program planted under `diag record` and
fixed without it, and per family counts: diag's claims (the recompile guards diag recorded in the
section's serving), confirmed (diag classified the guard as the planted kind, and torch
recorded that same text), fix verified (the fixed run serves without a recompile and with the
same outputs).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class KindFamily:
    name: str
    check: str  # the vocabulary entry torch's failure must classify as
    code: str  # body of run_<name>(fixed, seed) -> list of tensors
    #: The planted recompile is refused by a recompile limit the program lowered: torch's
    #: record is its recompile-limit hit, diag's claim a recompile-limit finding naming the
    #: lowered setting as the cause; the fix must leave no hit.
    lowered_limit: bool = False


def _family(name: str, check: str, code: str, lowered_limit: bool = False) -> KindFamily:
    return KindFamily(name, check, code.strip("\n"), lowered_limit)


FAMILIES: tuple[KindFamily, ...] = (
    _family(
        "size",
        "tensor-size",
        """
    f = compile_fn(lambda latents_size: latents_size * 2 + 1)
    s = 3 + seed % 3
    def arg(n):
        t = data(n, 4)
        if fixed:
            torch._dynamo.mark_dynamic(t, 0)
        return t
    f(arg(s))
    serve_start()
    return [f(arg(s + 2)), f(arg(s + 4))]
""",
    ),
    # The program's own settings (issue 35, item 4): the fix is to leave torch's default.
    _family(
        "setting_automatic_dynamic_off",
        "tensor-size",
        """
    config = torch._dynamo.config
    before = config.automatic_dynamic_shapes
    config.automatic_dynamic_shapes = fixed  # the program turned it off
    try:
        def fn(latents_auto):
            return latents_auto * 2
        f = compile_fn(fn)
        f(data(3, 4))
        f(data(4, 4))
        serve_start()
        return [f(data(5, 4)), f(data(6, 4))]
    finally:
        config.automatic_dynamic_shapes = before
""",
    ),
    # The program lowered the recompile limit; serving needs one entry more (another dtype):
    # torch refuses the compile and the call runs eagerly. The fix diag prints: raise the limit
    # (here: leave the harness's own), then warm that variant up.
    _family(
        "setting_recompile_limit_lowered",
        "tensor-dtype",
        """
    config = torch._dynamo.config
    name = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    before = getattr(config, name)
    if not fixed:
        setattr(config, name, 2)  # the program lowered it
    try:
        def fn(latents_lim):
            return latents_lim * 2 + 1
        f = compile_fn(fn)
        f(data(3, 4))
        f(data(3, 4).double())
        if fixed:
            f(data(3, 4).to(torch.bfloat16))
        serve_start()
        return [f(data(3, 4)), f(data(3, 4).to(torch.bfloat16))]
    finally:
        setattr(config, name, before)
""",
        lowered_limit=True,
    ),
    _family(
        "setting_dynamic_false",
        "tensor-size",
        """
    def fn(latents_static):
        return latents_static * 2
    f = compile_fn(fn, dynamic=None if fixed else False)
    f(data(3, 4))
    f(data(4, 4))
    serve_start()
    return [f(data(5, 4)), f(data(6, 4))]
""",
    ),
    _family(
        "size_0_1",
        "tensor-size-0-1",
        """
    def fn(timestep_b):
        return timestep_b * 3
    f = compile_fn(fn)
    def batch(n):
        t = data(n, 4)
        torch._dynamo.mark_dynamic(t, 0)
        return t
    f(batch(2))
    if fixed:
        f(data(1, 4))
    serve_start()
    return [f(batch(2)), f(data(1, 4))]
""",
    ),
    _family(
        "shape_relation",
        "tensor-shape-relation",
        """
    def fn(tokens_rel):
        return tokens_rel * 2 if tokens_rel.shape[0] > 4 else tokens_rel + 1
    f = compile_fn(fn, dynamic=True)
    f(data(6 + seed % 2, 4))
    if fixed:
        f(data(3, 4))
    serve_start()
    return [f(data(3, 4)), f(data(2, 4))]
""",
    ),
    _family(
        "stride",
        "tensor-stride",
        """
    def fn(hidden_stride):
        return hidden_stride * 2
    f = compile_fn(fn, dynamic=False)
    s = 3 + seed % 3
    f(data(s, 4))
    serve_start()
    t = data(4, s).t()
    return [f(t.contiguous() if fixed else t)]
""",
    ),
    _family(
        "rank",
        "tensor-rank",
        """
    def fn(latents_rank):
        return latents_rank * 2
    f = compile_fn(fn)
    f(data(3, 4))
    if fixed:
        f(data(3, 4, 2))
    serve_start()
    return [f(data(3, 4, 2))]
""",
    ),
    _family(
        "dtype",
        "tensor-dtype",
        """
    def fn(latents_dtype):
        return latents_dtype * 2
    f = compile_fn(fn)
    f(data(3, 4))
    serve_start()
    t = data(3, 4).double()
    return [f(t.to(torch.float32) if fixed else t)]
""",
    ),
    _family(
        "requires_grad",
        "tensor-requires-grad",
        """
    def fn(cond_grad):
        return cond_grad * 2
    f = compile_fn(fn)
    f(data(3, 4))
    serve_start()
    t = data(3, 4).requires_grad_()
    return [f(t.detach() if fixed else t)]
""",
    ),
    _family(
        "dispatch_keys",
        "tensor-dispatch-keys",
        """
    def fn(temb):
        return temb * 2 + 1
    f = compile_fn(fn)
    with torch.inference_mode():
        f(data(3, 4))
    serve_start()
    with torch.inference_mode() if fixed else torch.no_grad():
        return [f(data(3, 4))]
""",
    ),
    _family(
        "tensor_type",
        "tensor-type",
        """
    def fn(x_opt, mask_opt):
        return x_opt if mask_opt is None else x_opt * mask_opt
    f = compile_fn(fn)
    f(data(3, 4), data(3, 4))
    if fixed:
        f(data(3, 4), None)
    serve_start()
    return [f(data(3, 4), None)]
""",
    ),
    _family(
        "aliasing",
        "tensor-aliasing",
        """
    def fn(q_alias, k_alias):
        return q_alias * 2 + k_alias
    f = compile_fn(fn)
    f(data(3, 4), data(3, 4))
    serve_start()
    t = data(3, 4)
    return [f(t, t.clone() if fixed else t)]
""",
    ),
    _family(
        "dynamic_marking",
        "tensor-dynamic-marking",
        """
    def fn(latents_mark):
        return latents_mark * 2
    f = compile_fn(fn)
    def arg(mark):
        t = data(4, 4)
        if mark:
            torch._dynamo.mark_dynamic(t, 0)
        return t
    f(arg(fixed))
    serve_start()
    return [f(arg(True))]
""",
    ),
    _family(
        "module_int",
        "module-attribute",
        """
    class Cache(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cnt = 0
        def forward(self, hidden_cache):
            return hidden_cache * (self.cnt + 1)
    if fixed:
        torch._dynamo.config.allow_unspec_int_on_nn_module = True
    try:
        m = Cache()
        f = compile_fn(m)
        outs = []
        for step in range(5):
            if step == 2:
                serve_start()
            m.cnt = step
            outs.append(f(data(3, 4)))
        return outs[2:]
    finally:
        torch._dynamo.config.allow_unspec_int_on_nn_module = False
""",
    ),
    _family(
        "global",
        "global-value",
        """
    def fn(x_glob):
        return x_glob * GLOBAL_SCALE
    def fn_arg(x_glob, scale):
        return x_glob * scale
    f = compile_fn(fn_arg if fixed else fn)
    outs = []
    for i, scale in enumerate((2.0, 3.0, 4.0)):
        if i == 1:
            serve_start()
        globals()["GLOBAL_SCALE"] = scale
        outs.append(f(data(3, 4), torch.tensor(scale)) if fixed else f(data(3, 4)))
    return outs[1:]
""",
    ),
    _family(
        "closure",
        "closure-value",
        """
    def make(k):
        def scale(x_clos):
            return x_clos * k
        return scale
    def call(x_clos, g):
        return g(x_clos)
    def call_arg(x_clos, k):
        return x_clos * k
    f = compile_fn(call_arg if fixed else call)
    outs = []
    for i, k in enumerate((2.0, 3.0, 4.0)):
        if i == 1:
            serve_start()
        outs.append(f(data(3, 4), torch.tensor(k)) if fixed else f(data(3, 4), make(k)))
    return outs[1:]
""",
    ),
    _family(
        "object_attr",
        "object-attribute",
        """
    class Config:
        scale = 1.0
    def fn(x_cfg, cfg):
        return x_cfg * cfg.scale
    def fn_arg(x_cfg, scale):
        return x_cfg * scale
    f = compile_fn(fn_arg if fixed else fn)
    cfg = Config()
    outs = []
    for i, scale in enumerate((2.0, 3.0, 4.0)):
        if i == 1:
            serve_start()
        cfg.scale = scale
        outs.append(f(data(3, 4), torch.tensor(scale)) if fixed else f(data(3, 4), cfg))
    return outs[1:]
""",
    ),
    _family(
        "argument_float",
        "argument-value",
        """
    def fn(x_guid, guidance):
        return x_guid * guidance
    f = compile_fn(fn, dynamic=False)
    arg = (lambda g: torch.tensor(g)) if fixed else (lambda g: g)
    f(data(3, 4), arg(3.5))
    serve_start()
    return [f(data(3, 4), arg(5.0)), f(data(3, 4), arg(7.5))]
""",
    ),
    _family(
        "argument_str",
        "argument-value",
        """
    def fn(x_mode, mode):
        return x_mode * 2 if mode == "cond" else x_mode - 1
    f = compile_fn(fn)
    f(data(3, 4), "cond")
    if fixed:
        f(data(3, 4), "uncond")
    serve_start()
    return [f(data(3, 4), "uncond")]
""",
    ),
    _family(
        "bool",
        "bool-value",
        """
    def fn(x_flag, use_cfg):
        return x_flag * 2 if use_cfg else x_flag
    f = compile_fn(fn)
    f(data(3, 4), True)
    if fixed:
        f(data(3, 4), False)
    serve_start()
    return [f(data(3, 4), False)]
""",
    ),
    _family(
        "type",
        "object-type",
        """
    def fn(parts_type):
        return parts_type[0] * 2
    f = compile_fn(fn)
    f([data(3, 4)])
    serve_start()
    parts = (data(3, 4),)
    return [f(list(parts) if fixed else parts)]
""",
    ),
    _family(
        "length",
        "container-length",
        """
    def fn(parts_len):
        return sum(parts_len)
    f = compile_fn(fn)
    f([data(3, 4), data(3, 4)])
    if fixed:
        f([data(3, 4), data(3, 4), data(3, 4)])
    serve_start()
    return [f([data(3, 4), data(3, 4), data(3, 4)])]
""",
    ),
    _family(
        "dict_keys",
        "dict-keys",
        """
    def fn(conds_keys):
        return sum(v * 2 for v in conds_keys.values())
    f = compile_fn(fn)
    a, b = data(3, 4), data(3, 4)
    f({"a": a, "b": b})
    serve_start()
    d = {"b": b, "a": a}
    return [f({k: d[k] for k in ("a", "b")} if fixed else d)]
""",
    ),
    _family(
        "set",
        "set-contains",
        """
    def fn(x_set, skip_layers):
        return x_set * 2 if 3 in skip_layers else x_set
    f = compile_fn(fn)
    f(data(3, 4), {3})
    if fixed:
        f(data(3, 4), {4})
    serve_start()
    return [f(data(3, 4), {4})]
""",
    ),
    _family(
        "grad_mode",
        "grad-mode",
        """
    def fn(x_grad):
        return x_grad * 2
    f = compile_fn(fn)
    with torch.no_grad():
        f(data(3, 4))
    serve_start()
    with torch.no_grad() if fixed else contextlib.nullcontext():
        return [f(data(3, 4))]
""",
    ),
    _family(
        "autocast",
        "autocast",
        """
    def fn(x_amp, w_amp):
        return x_amp @ w_amp
    f = compile_fn(fn)
    amp = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    with amp() if fixed else contextlib.nullcontext():
        f(data(3, 4), data(4, 4))
    serve_start()
    with amp():
        return [f(data(3, 4), data(4, 4))]
""",
    ),
    _family(
        "default_dtype",
        "default-dtype",
        """
    def fn(x_dd):
        return x_dd + torch.ones(4)
    f = compile_fn(fn)
    try:
        if fixed:
            torch.set_default_dtype(torch.float64)
        f(data(3, 4))
        serve_start()
        torch.set_default_dtype(torch.float64)
        return [f(data(3, 4))]
    finally:
        torch.set_default_dtype(torch.float32)
""",
    ),
    _family(
        "deterministic",
        "deterministic-algorithms",
        """
    def fn(x_det):
        return x_det * 2
    f = compile_fn(fn)
    try:
        if fixed:
            torch.use_deterministic_algorithms(True)
        f(data(3, 4))
        serve_start()
        torch.use_deterministic_algorithms(True)
        return [f(data(3, 4))]
    finally:
        torch.use_deterministic_algorithms(False)
""",
    ),
    _family(
        "num_threads",
        "num-threads",
        """
    def fn(x_threads):
        return x_threads * 2
    f = compile_fn(fn)
    before = torch.get_num_threads()
    try:
        if fixed:
            torch.set_num_threads(1 if before != 1 else 2)
        f(data(3, 4))
        serve_start()
        torch.set_num_threads(1 if before != 1 else 2)
        return [f(data(3, 4))]
    finally:
        torch.set_num_threads(before)
""",
    ),
    _family(
        "matmul_precision",
        "matmul-precision",
        """
    def fn(x_tf32):
        return x_tf32 * 2
    f = compile_fn(fn)
    flags = torch.backends.cuda.matmul
    try:
        if fixed:
            flags.allow_tf32 = True
        f(data(3, 4))
        serve_start()
        flags.allow_tf32 = True
        return [f(data(3, 4))]
    finally:
        flags.allow_tf32 = False
""",
    ),
    _family(
        "torch_function_mode",
        "torch-function-mode",
        """
    def fn(x_dev):
        return x_dev + torch.ones(4)
    f = compile_fn(fn)
    with torch.device("cpu") if fixed else contextlib.nullcontext():
        f(data(3, 4))
    serve_start()
    with torch.device("cpu"):
        return [f(data(3, 4))]
""",
    ),
    _family(
        "backend",
        "backend",
        """
    def fn(x_backend):
        return x_backend * 2
    def backend(gm, example_inputs):
        return gm.forward
    once = torch.compile(fn, backend=backend)
    def per_request():
        return once if fixed else torch.compile(fn, backend=lambda gm, ex: gm.forward)
    per_request()(data(3, 4))
    serve_start()
    return [per_request()(data(3, 4))]
""",
    ),
)

BY_NAME = {f.name: f for f in FAMILIES}

_HEADER = '''"""Generated by bench/fidelity_kit/guard_kinds.py: one section per guard kind."""
import contextlib
import json
import sys

import torch
import torch._dynamo
from torch._dynamo.utils import counters, guard_failures

BACKEND = "aot_eager"
GLOBAL_SCALE = 1
_GEN = torch.Generator()
_SERVE = {}


def data(*shape):
    return torch.randn(*shape, generator=_GEN)


def compile_fn(fn, **kw):
    return torch.compile(fn, backend=BACKEND, **kw)


def _reasons():
    return [r for rs in guard_failures.values() for r in rs]


def _limit_hits():
    """Torch's own count of compiles a recompile limit refused (a graph break it records)."""
    return sum(n for k, n in counters["unimplemented"].items() if "recompile limit" in k)


def serve_start():
    """Serving starts: its inputs are the same whatever warmup drew (a fix may warm up more)."""
    _SERVE["at"] = len(_reasons())
    _SERVE["limit_at"] = _limit_hits()
    _GEN.manual_seed(_SERVE["seed"] + 7919)

'''

_MAIN = """

def main():
    names, seed = sys.argv[1].split(","), int(sys.argv[2])
    fixed, out = sys.argv[3] == "fixed", sys.argv[4]
    config = torch._dynamo.config
    limit = "recompile_limit" if hasattr(config, "recompile_limit") else "cache_size_limit"
    setattr(config, limit, 64)  # torch < 2.7 calls it cache_size_limit
    results = {}
    for name in names:
        torch._dynamo.reset()
        guard_failures.clear()
        counters.clear()
        _GEN.manual_seed(seed)
        _SERVE.clear()
        _SERVE["seed"] = seed
        try:
            outputs = globals()["run_" + name](fixed, seed)
            error = None
        except Exception as exc:
            outputs, error = [], f"{type(exc).__name__}: {exc}"[:500]
        reasons = _reasons()
        at = _SERVE.get("at", len(reasons))
        results[name] = {
            "warmup": reasons[:at],
            "serve": reasons[at:],
            "serve_limit_hits": _limit_hits() - _SERVE.get("limit_at", 0),
            "outputs": [o.detach().double().flatten().tolist() for o in outputs],
            "error": error,
        }
    with open(out, "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    main()
"""


def program_source(families: Iterable[KindFamily]) -> str:
    parts = [_HEADER]
    parts += [f"\ndef run_{f.name}(fixed, seed):\n{f.code}\n" for f in families]
    parts.append(_MAIN)
    return "".join(parts)


@dataclass
class KindResult:
    family: str
    check: str
    claims: int = 0
    confirmed: int = 0
    fix_verified: bool = False
    torch_serve: list[str] = field(default_factory=list)
    diag_checks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Lowered-limit families: torch's serving limit hits, and diag's recompile-limit findings
    #: that name the lowered setting as the cause (None: not scored).
    torch_limit_hits: int | None = None
    diag_lowered_limit: int | None = None


def _run(cmd: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def _diag_recompile_guards(trace: Path) -> list[str]:
    """Raw texts of every guard of every recompile event diag recorded."""
    found: list[str] = []
    for events in sorted(trace.rglob("events.jsonl")):
        for line in events.read_text(encoding="utf-8", errors="replace").splitlines():
            if '"recompile"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("ev") != "recompile":
                continue
            found.extend(str(g.get("raw", "")) for g in event.get("guards") or [])
    return found


def _same(a: list[list[float]], b: list[list[float]]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if len(x) != len(y):
            return False
        if any(abs(p - q) > 1e-3 * (1 + abs(q)) for p, q in zip(x, y, strict=True)):
            return False
    return True


def run_kinds(
    families: list[KindFamily],
    seed: int,
    folder: Path | None = None,
    record: bool = True,
    timeout: float = 400,
) -> list[KindResult]:
    """Run the program planted under `diag record` (plain when not `record`: diag's claims are
    then its classification of torch's texts) and fixed, and score each family."""
    work = folder or Path(tempfile.mkdtemp(prefix="guard-kinds-"))
    work.mkdir(parents=True, exist_ok=True)
    program = work / "program.py"
    program.write_text(program_source(families), encoding="utf-8")
    names = ",".join(f.name for f in families)
    planted, fixed = work / "planted.json", work / "fixed.json"
    trace = work / "trace"
    plain = [sys.executable, str(program), names, str(seed)]
    if record:
        cmd = [sys.executable, "-m", "diag", "record", "--force", "--profile", "none"]
        cmd += ["-o", str(trace), "--"]
        done = _run([*cmd, *plain, "planted", str(planted)], timeout)
    else:
        done = _run([*plain, "planted", str(planted)], timeout)
    if done.returncode != 0 or not planted.exists():
        raise RuntimeError(f"planted run failed ({done.returncode}): {done.stderr[-2000:]}")
    done = _run([*plain, "fixed", str(fixed)], timeout)
    if done.returncode != 0 or not fixed.exists():
        raise RuntimeError(f"fixed run failed ({done.returncode}): {done.stderr[-2000:]}")
    return score(work, families, record)


def score(work: Path, families: list[KindFamily], record: bool = True) -> list[KindResult]:
    """Each family's claims, confirmed and fix verified, from a run folder of run_kinds."""
    from diag.trace.guards import guard_check

    got: dict[str, Any] = json.loads((work / "planted.json").read_text(encoding="utf-8"))
    repaired: dict[str, Any] = json.loads((work / "fixed.json").read_text(encoding="utf-8"))
    recorded = _diag_recompile_guards(work / "trace") if record else []
    results = []
    for family in families:
        result = KindResult(family.name, family.check)
        mine, theirs = got.get(family.name, {}), repaired.get(family.name, {})
        result.torch_serve = list(mine.get("serve", []))
        for err in (mine.get("error"), theirs.get("error")):
            if err:
                result.notes.append(err)
        if record:
            # diag's record holds warmup and serving alike: a text torch also wrote during
            # warmup counts for serving only beyond its warmup count.
            seen, warm = Counter(recorded), Counter(mine.get("warmup", []))
            claims = []
            for raw, count in Counter(result.torch_serve).items():
                claims += [raw] * min(count, max(0, seen[raw] - warm[raw]))
        else:
            claims = list(result.torch_serve)
        result.claims = len(claims)
        result.diag_checks = [guard_check(raw) for raw in claims]
        result.confirmed = sum(1 for c in result.diag_checks if c == family.check)
        result.fix_verified = (
            bool(result.torch_serve)
            and not theirs.get("serve")
            and not theirs.get("error")
            and not theirs.get("serve_limit_hits")
            and _same(theirs.get("outputs", []), mine.get("outputs", []))
        )
        if theirs.get("serve"):
            result.notes.append(f"fixed run still recompiles: {theirs['serve'][0][:200]}")
        if family.lowered_limit:
            _score_lowered_limit(result, mine, theirs, work / "trace" if record else None)
        results.append(result)
    return results


def _score_lowered_limit(
    result: KindResult, mine: dict[str, Any], theirs: dict[str, Any], trace: Path | None
) -> None:
    """Torch's serving limit hits beside diag's recompile-limit findings that name the lowered
    setting as the cause (claims `limit.cause == "lowered-setting"`)."""
    result.torch_limit_hits = int(mine.get("serve_limit_hits") or 0)
    if not result.torch_limit_hits:
        result.notes.append("torch recorded no recompile-limit hit in serving")
    if theirs.get("serve_limit_hits"):
        result.notes.append("fixed run still hits the recompile limit")
    if trace is None:
        return
    from diag.analyzers import run_analyzers
    from diag.trace.load import load_trace

    findings = run_analyzers(load_trace(trace), ["recompile-limit"])
    result.diag_lowered_limit = sum(
        1
        for f in findings
        for c in f.claims
        if c.get("kind") == "recompile-limit"
        and (c.get("limit") or {}).get("cause") == "lowered-setting"
    )
    result.notes.append(
        f"recompile-limit hits in serving: torch {result.torch_limit_hits}, diag's findings "
        f"naming the lowered limit as the cause {result.diag_lowered_limit}"
    )


def report(results: list[KindResult], per_seed: int = 1) -> str:
    """The per-kind table: claims, confirmed, fix verified (markdown)."""
    rows = [
        "| family | guard kind | torch's serving recompiles | diag's claims | confirmed | "
        "fix verified |",
        "|---|---|---|---|---|---|",
    ]
    by: dict[str, list[KindResult]] = {}
    for r in results:
        by.setdefault(r.family, []).append(r)
    for name, rs in by.items():
        rows.append(
            f"| {name} | {rs[0].check} | {sum(len(r.torch_serve) for r in rs)} | "
            f"{sum(r.claims for r in rs)} | {sum(r.confirmed for r in rs)} | "
            f"{sum(r.fix_verified for r in rs)}/{len(rs)} |"
        )
    return "\n".join(rows)
