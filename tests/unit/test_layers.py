"""diag's import graph: no circle, and no layer importing one above it (docs/ARCHITECTURE.md).

Read off the source with `ast`, nothing imported: every `import` and `from ... import` counts,
at module level, inside a function or under TYPE_CHECKING (a circle through a lazy import is
still a circle a reader must untangle). `importlib.import_module` by name is not seen: the two
places that use it say why (findings.analysis reaches the analyzer registry, trace.load the
parallel reader).
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The layers, lowest first: a module may import its own layer and those before it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("diag.errors", "diag.api"),
    ("diag.trace",),
    ("diag.evidence",),
    ("diag.findings",),
    ("diag.analyzers",),
    # The faces: each reads the layers below; none is read by them.
    (
        "diag.record",
        "diag.live",
        "diag.collectors",
        "diag.check",
        "diag.benchmark",
        "diag.perfetto",
        "diag.report",
        "diag.notebook",
        "diag.tui",
        "diag.warmup",
        "diag.cli",
        "diag.fixtures",
        "diag.__main__",
    ),
)


def _package_dirs() -> dict[str, Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {
        name: ROOT / folder for name, folder in mapping.items() if "." in name or name == "diag"
    }


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    dirs = _package_dirs()
    for package, folder in dirs.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _imported(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in modules:
                    yield full
                elif target in modules:
                    yield target


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {d for d in _imported(name, path, modules) if d != name}
        for name, path in modules.items()
    }


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _layer(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[0]:
                    best = (len(prefix), level)
    return best[1] if best is not None else None


def test_the_graph_sees_diags_modules() -> None:
    graph = _graph()
    for name in ("diag.trace.run", "diag.evidence.causes", "diag.findings.model"):
        assert name in graph
    assert "diag.collectors.session" in graph and "diag.analyzers.recompiles" in graph
    assert "diag.trace.run" in graph["diag.trace.load"]


def test_no_import_circles() -> None:
    circles = _circles(_graph())
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_every_module_has_a_layer() -> None:
    loose = sorted(m for m in _graph() if m != "diag" and _layer(m) is None)
    assert not loose, f"modules in no layer (add them to a package, or to LAYERS): {loose}"


def test_no_layer_imports_one_above_it() -> None:
    upward = []
    for module, imports in sorted(_graph().items()):
        mine = _layer(module)
        for target in sorted(imports):
            theirs = _layer(target)
            if mine is None or theirs is None:
                continue
            if theirs > mine or _reads_collectors(module, target):
                upward.append(f"{module} -> {target}")
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def _reads_collectors(module: str, target: str) -> bool:
    """The collectors run inside the recorded program: nothing outside them imports them."""
    inside = "diag.collectors"
    return target.startswith(inside) and not module.startswith(inside)


def test_the_check_finds_a_circle_and_an_upward_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert _layer("diag.trace.run") == 1 and _layer("diag.cli.record") == len(LAYERS) - 1
