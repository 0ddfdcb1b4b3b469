"""magi-compile: code compiled by MAGI's magi_compile, whose recompiles Dynamo cannot report.

Why: `@magi_compile` (magi_compiler, LightX2V's `use_magi_compile`) compiles a function once
through Dynamo and then swaps its `__code__` for the compiled artefact: Dynamo never re-checks
guards there, so when such code re-specialises (or silently stops matching), nothing shows up in
Dynamo's logs or in this trace's compile events. A trace with "no recompiles" therefore proves
nothing about magi-compiled code; this analyzer says which targets that applies to.
"""

from __future__ import annotations

from diag.findings import Finding
from diag.run import RunData, Trace

ANALYZER = "magi-compile"


def analyze(trace: Trace) -> list[Finding]:
    cwd = trace.manifest.get("cwd")
    findings: list[Finding] = []
    for run in trace.subject_runs:
        finding = _analyze_run(run, cwd if isinstance(cwd, str) else None)
        if finding is not None:
            findings.append(finding)
    return findings


def _analyze_run(run: RunData, cwd: str | None) -> Finding | None:
    events = run.of("magi_compile")
    if not events:
        return None
    modules = list(dict.fromkeys(str(e.data.get("module") or "magi_compiler") for e in events))
    targets: list[dict[str, str | int | None]] = []
    for event in events:
        target = event.data.get("target")
        if not isinstance(target, dict) or not target.get("name"):
            continue
        file = target.get("file")
        line = target.get("line")
        entry: dict[str, str | int | None] = {
            "name": str(target["name"]),
            "file": _relative(file, cwd) if isinstance(file, str) else None,
            "line": line if isinstance(line, int) else None,
        }
        if entry not in targets:
            targets.append(entry)
    listed = [_describe(t) for t in targets]
    recompiles = [c for c in run.compiles if c.is_recompile]
    evidence = [f"the program imports {', '.join(modules)} and uses magi_compile"]
    if listed:
        evidence.append(f"magi-compiled target(s): {', '.join(listed)}")
    else:
        evidence.append(
            "no decorated target was seen (decorated before diag's hook, or through another "
            "entry point): every magi-compiled function is a blind spot"
        )
    evidence.append(
        "magi_compile swaps __code__ after the first compile, so Dynamo does not re-check "
        "guards of that code and its recompiles appear neither in Dynamo's logs nor here"
    )
    evidence.append(
        f"this trace records {len(run.compiles)} compile(s) and {len(recompiles)} recompile(s) "
        "in all (a magi target's first compile may be among them, its later ones are not): "
        '"no recompiles" here does not prove none happened in magi-compiled code'
    )
    names = ", ".join(str(t["name"]) for t in targets) or "magi-compiled code"
    first = targets[0] if targets else None
    location = f"{first['file']}:{first['line']}" if first is not None and first["file"] else None
    return Finding(
        id=f"{ANALYZER}:{modules[0]}{'' if run.label == 'compiled' else '@' + run.label}",
        analyzer=ANALYZER,
        severity="warning",
        title=f"Recompiles of magi-compiled code ({names}) are invisible to Dynamo's logs",
        evidence=evidence,
        fix="To see these recompiles, record once with magi_compile replaced by plain "
        "torch.compile (LightX2V: turn use_magi_compile off) and check the recompiles there; "
        "otherwise check MAGI's own logs. Do not read a clean trace as proof for these targets.",
        location=location,
        run=run.label,
        data={"modules": modules, "targets": targets},
    )


def _describe(target: dict[str, str | int | None]) -> str:
    if target["file"]:
        return f"{target['name']} ({target['file']}:{target['line']})"
    return str(target["name"])


def _relative(path: str, cwd: str | None) -> str:
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path
