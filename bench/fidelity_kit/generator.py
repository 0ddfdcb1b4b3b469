"""Sample program specs from a seed: family x compiled unit x dynamic x warmup x marking x one
or two planted causes x layout, with a clean variant of each family.

`sample(seed, n, families)` is deterministic: the same seed and n give the same programs.
Families are taken in turn so that any n covers them evenly; every 4th program is clean (warmup
covering every live shape, warmup marked, nothing planted), so 36 programs hold a clean variant
of each of the 9 families.
"""

from __future__ import annotations

import random

from .families import FAMILIES
from .spec import DYNAMICS, MARKINGS, PLANTS, ProgramSpec, Request

STEPS = 3
#: Plants that end the program (at most one per program, never with `crash`).
_FATAL = {"crash", "mark-dynamic-conflict", "backend-failure"}
#: Plants that need a processor inside the compiled unit or a compiled helper: any unit.
_NEEDS_BLOCK_UNIT = {"layer-strides"}


def sample(
    seed: int,
    n: int,
    families: list[str] | None = None,
    backend: str = "aot_eager",
    layouts: tuple[str, ...] = ("single", "spawn", "ranks"),
) -> list[ProgramSpec]:
    names = families or list(FAMILIES)
    specs = []
    for index in range(n):
        rng = random.Random(f"{seed}:{index}")
        family = names[index % len(names)]
        clean = index % 4 == 3  # every 4th; with 9 families, each gets one in 36 programs
        specs.append(_one(rng, seed, index, family, clean, backend, layouts))
    return specs


def _one(
    rng: random.Random,
    seed: int,
    index: int,
    family: str,
    clean: bool,
    backend: str,
    layouts: tuple[str, ...],
) -> ProgramSpec:
    fam = FAMILIES[family]
    units = ["repeated" if fam.repeated else "per-block", "per-block", "whole", "helper"]
    unit = rng.choice(units)
    dynamic = rng.choice(DYNAMICS)
    layout = "single"
    roll = rng.random()
    if roll < 0.08 and "spawn" in layouts:
        layout = "spawn"
    elif roll < 0.16 and "ranks" in layouts:
        layout = "ranks"
    if clean:
        plants: list[str] = []
        warmup, marking = "all", "api"
    else:
        plants = _plants(rng, unit, backend)
        warmup = rng.choice(("none", "one", "two", "all"))
        marking = rng.choice(MARKINGS)
        if ("unwarmed-shape" in plants or "backend-failure" in plants) and warmup == "all":
            warmup = rng.choice(("one", "two"))
        if "backend-failure" in plants:
            # It fails the first compile of live traffic: make sure there is one (an unwarmed
            # shape that a static or not-yet-dynamic entry cannot serve).
            warmup = "one"
            dynamic = "None" if dynamic == "True" else dynamic
        if warmup == "none" and marking == "flag":
            marking = "none"
    spec = ProgramSpec(
        program_id=f"s{seed}-{index:03d}-{family}",
        seed=seed,
        family=family,
        unit=unit,
        dynamic=dynamic,
        warmup=warmup,
        marking=marking,
        layout=layout,
        backend=backend,
        plants=plants,
        requests=[],
        clean=clean,
    )
    spec.requests = requests_for(spec)
    return spec


def _plants(rng: random.Random, unit: str, backend: str) -> list[str]:
    """One or two compatible plants; `suppress-errors` brings the failure it suppresses, and a
    backend failure needs a live compile (an unwarmed shape). `patched-torch` only changes what
    Inductor caches, so only inductor programs get it."""
    pool = [p for p in PLANTS if unit in ("repeated", "per-block") or p not in _NEEDS_BLOCK_UNIT]
    if backend != "inductor":
        pool.remove("patched-torch")
    count = 1 if rng.random() < 0.55 else 2
    chosen: list[str] = []
    while len(chosen) < count:
        plant = rng.choice(pool)
        if plant in chosen:
            continue
        if plant in _FATAL and any(p in _FATAL for p in chosen):
            continue
        if plant == "suppress-errors" and "crash" in chosen:
            continue
        chosen.append(plant)
    if "suppress-errors" in chosen:
        failing = [p for p in chosen if p in ("backend-failure", "mark-dynamic-conflict")]
        if not failing:
            chosen = [p for p in chosen if p != "crash"]
            chosen.append(rng.choice(("backend-failure", "mark-dynamic-conflict")))
    if "backend-failure" in chosen and "unwarmed-shape" not in chosen:
        chosen.append("unwarmed-shape")
    return chosen


def requests_for(spec: ProgramSpec) -> list[Request]:
    """Warmup then live requests, numbered as diag numbers them (w1, w2, r3, ...)."""
    res = [list(r) for r in FAMILIES[spec.family].resolutions]
    plants = set(spec.plants)
    live: list[tuple[list[int], int]] = [(res[0], STEPS), (res[1], STEPS)]
    if spec.warmup in ("none", "one"):
        live = [(res[0], STEPS), (res[0], STEPS)]
    if plants & {"unwarmed-shape", "hidden-dim"}:
        live.insert(1, (res[2], STEPS))
    if plants & {"python-scalar", "recompile-limit"}:
        live.insert(1, (res[0], STEPS + 1))
    warm_res: list[list[int]] = {
        "none": [],
        "one": [res[0]],
        "two": [res[0], res[1]],
        "all": _unique([r for r, _ in live]),
    }[spec.warmup]
    if spec.warmup == "all" and plants & {"python-scalar", "recompile-limit"}:
        warm = [(r, STEPS) for r in warm_res] + [(res[0], STEPS + 1)]
    else:
        warm = [(r, STEPS) for r in warm_res]
    requests = []
    number = 0
    for phase, items in (("warmup", warm), ("live", live)):
        for r, steps in items:
            number += 1
            prefix = "w" if phase == "warmup" else "r"
            requests.append(Request(f"{prefix}{number}", phase, r, steps))
    if "global-switch" in plants:
        # A quality tier read by compiled code: the second live request asks for another one.
        live_ids = [q for q in requests if q.phase == "live"]
        live_ids[min(1, len(live_ids) - 1)].tier = "math"
    for k, request in enumerate(requests):
        request.churn = 1.0 + 0.125 * k if "attr-churn" in plants else 1.0
    return requests


def _unique(items: list[list[int]]) -> list[list[int]]:
    seen: list[list[int]] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen
