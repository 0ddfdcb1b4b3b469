"""The fixed sample CI runs (tests/integration/test_fidelity_sample.py; `python bench/fidelity.py
--sample ci`): six small programs on the hand-written TinyDiT (no diffusers import), aot_eager,
one process each, chosen so that every claim kind the oracle can check has a real case:

- `ci-switch-strides`: issue 23's first case. Blocks compiled one by one (dynamic=False); layer
  0 gets its input in a transposed layout, so warmup leaves one entry per layout; a live
  request at another quality tier (a module-level dict read inside the blocks) recompiles both
  layers, and the newest entry's reason is a stride, not the tier.
- `ci-limit-break`: a compiled scheduler step over Python floats with dynamic=False and a
  recompile limit of 3: a live request with another step count hits the limit, its calls run
  eagerly, and the next request runs compiled again; `.item()` breaks the compiled
  post-processing graph; every live request ends with `torch.cuda.empty_cache()`. Warmup is
  marked with `--warmup-requests`.
- `ci-suppressed-failure`: the backend fails on the first compile of live traffic (an unwarmed
  shape) and `suppress_errors` swallows it; Dynamo then skips the frame, so the warmed shape
  runs eagerly too (warmup's entry stays in the cache, unused).
- `ci-crash-unmarked`: warmup not marked for diag; the program raises after its last request.
- `ci-constraint`: a dim marked dynamic that the code reads from Python state: the first compile
  fails with ConstraintViolationError and the program dies of it.
- `ci-clean`: warmup covers every live shape, marked with diag.api, nothing planted.
"""

from __future__ import annotations

from .generator import requests_for
from .spec import ProgramSpec


def _spec(
    name: str,
    unit: str,
    warmup: str,
    marking: str,
    plants: list[str],
    dynamic: str = "None",
    backend: str = "aot_eager",
) -> ProgramSpec:
    spec = ProgramSpec(
        program_id=name,
        seed=0,
        family="tinydit",
        unit=unit,
        dynamic=dynamic,
        warmup=warmup,
        marking=marking,
        layout="single",
        backend=backend,
        plants=plants,
        requests=[],
        clean=not plants,
    )
    spec.requests = requests_for(spec)
    return spec


def ci_sample() -> list[ProgramSpec]:
    return [
        _spec(
            "ci-switch-strides",
            "per-block",
            "one",
            "api",
            ["global-switch", "layer-strides"],
            dynamic="False",
        ),
        _spec(
            "ci-limit-break",
            "helper",
            "one",
            "flag",
            ["recompile-limit", "graph-break-item", "empty-cache"],
        ),
        _spec(
            "ci-suppressed-failure",
            "helper",
            "one",
            "api",
            ["backend-failure", "suppress-errors", "unwarmed-shape"],
        ),
        _spec("ci-crash-unmarked", "helper", "one", "none", ["crash"]),
        _spec("ci-constraint", "helper", "one", "api", ["mark-dynamic-conflict"]),
        _spec("ci-clean", "helper", "all", "api", []),
    ]


def inductor_sample() -> list[ProgramSpec]:
    """`--sample inductor`: issue 23's patched-torch case (the program replaces torch.empty after
    `import torch`; the compiled helper calls it), where what AOTAutograd caches can differ with
    and without diag, beside the same program unpatched. Cold Inductor compiles: minutes."""
    return [
        _spec("ind-patched-torch", "helper", "one", "api", ["patched-torch"], backend="inductor"),
        _spec("ind-clean", "helper", "all", "api", [], backend="inductor"),
    ]
