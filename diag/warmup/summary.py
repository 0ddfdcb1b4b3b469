"""The warmup plan as the TUI and the report show it beside warmup coverage: computed once per
trace by `plan_for` (diag/warmup/plan.py's plan, from the findings the face already has), and
worded once by `summary_lines`. The faces escape each line into their markup."""

from __future__ import annotations

from typing import Any

from diag.errors import DiagError
from diag.trace.run import Trace
from diag.warmup.forms import fixture_shapes, render
from diag.warmup.plan import WarmupPlan, explanations, plan_warmup

#: The finding that states warmup coverage (analyzers/live_compiles.py): the plan goes beside it.
COVERAGE_ID = "live-compile:warmup-coverage"


def plan_for(trace: Trace, findings: list[Any]) -> WarmupPlan | None:
    """The plan of one trace, from the findings the face already has (each face makes it once,
    when it loads them); None when the trace has no live request with a shape to plan by."""
    plan = plan_warmup([trace], {str(trace.path): explanations(findings)})
    return plan if plan.requests else None


def _form(plan: WarmupPlan, trace: Trace) -> str | None:
    """The plan in the form the recorded program takes, when diag knows it."""
    command = trace.manifest.get("command")
    words = [str(w) for w in command] if isinstance(command, list) else []
    try:
        if plan.runner is not None:
            return render(plan, "lightx2v").splitlines()[0]
        if "diag.fixtures" in words:
            return "--warmup-shapes " + fixture_shapes(plan)
        if "height" in plan.dims and "width" in plan.dims:
            return render(plan, "diffusers").splitlines()[0]
    except DiagError:
        return None
    return None


def summary_lines(plan: WarmupPlan, trace: Trace) -> list[str]:
    """A few plain lines: the plan's requests in order, what it covers, what it cannot, the form
    to paste and the command that verifies it."""
    live = plan.live_compiles
    cost = sum(r.cost_s or 0.0 for r in plan.requests)
    lines = [
        f"warmup plan: {len(plan.requests)} request(s), about {cost:.2f} s of compile; it moves "
        f"{sum(1 for c in live if c.cannot is None and c.covered_by is not None)} of "
        f"{len(live)} live compile(s) into warmup"
        + (f"; {len(plan.unpreventable)} no warmup can prevent" if plan.unpreventable else "")
    ]
    for index, request in enumerate(plan.requests):
        shape = "x".join(map(str, request.shape)) or "?"
        lines.append(
            f"{index + 1}. {shape} [{request.role}]"
            + (f" like {request.like}" if request.like else "")
            + (f": covers {', '.join(c.split(' ', 1)[0] for c in request.covers)}"
               if request.covers else "")
        )  # fmt: skip
    lines += [
        f"cannot: {item.compile_id} ({item.frame}, {item.request}): {item.cannot}"
        for item in plan.unpreventable
    ]
    form = _form(plan, trace)
    if form:
        lines.append(f"paste: {form}")
    lines.append(f"verify: diag warmup-plan {trace.path} --verify -- CMD (docs/WARMUP.md)")
    return lines
