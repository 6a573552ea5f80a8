"""No import cycle inside an app (issue 8): the module-level imports of each app form a DAG, and
every module imports on its own in a fresh interpreter (after ``django.setup()``), so no module
works only because another one happened to be imported first.

Function-local imports count as edges for the events app (split so it needs none to break a
cycle); elsewhere they are allowed where they break a real cycle, each with a one-line reason.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ["accounts", "events", "fabric", "telemetry", "lab", "weft", "pools", "scheduler", "devices"]


def _modules(app: str) -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / app).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if "tests" in parts or "migrations" in parts or "management" in parts:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _edges(name: str, path: Path, known: set[str], local: bool = True) -> set[str]:
    """Modules of ``known`` that ``name`` imports: at module level, and with ``local`` also inside
    functions (``if TYPE_CHECKING`` blocks excluded)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    targets: set[str] = set()

    def resolve(node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def visit(body) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                mod = resolve(node)
                targets.add(mod)
                targets.update(f"{mod}.{a.name}" for a in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if local or isinstance(node, ast.ClassDef):
                    visit(node.body)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    out = set()
    for t in targets:
        while t and t not in known:
            t = t.rsplit(".", 1)[0] if "." in t else ""
        if t and t != name:
            out.add(t)
    return out


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = dfs(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = dfs(node)
            if found:
                return found
    return None


def _graph(app: str, local: bool) -> dict[str, set[str]]:
    modules = _modules(app)
    return {name: _edges(name, path, set(modules), local=local) for name, path in modules.items()}


@pytest.mark.parametrize("app", APPS)
def test_no_module_level_import_cycle_inside_app(app):
    graph = _graph(app, local=False)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_events_has_no_import_cycle_even_through_function_local_imports():
    """The events app was split so that nothing in it needs a function-local import to break a
    cycle: policies → engine → rules → tasks → signals is a DAG even counting them."""
    graph = _graph("events", local=True)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])
    assert "events.signals" in graph["events.apps"] and "events.engine" not in graph["events.policies"]


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_each_events_module_imports_alone():
    """Every module of the events app, imported first in a fresh interpreter, after django.setup()."""
    names = sorted(_modules("events"))
    code = (
        "import importlib, os, sys, django\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'weft.settings')\n"
        "django.setup()\n"
        "importlib.import_module(sys.argv[1])\n"
    )
    failures = []
    for name in names:
        proc = subprocess.run(
            [sys.executable, "-c", code, name], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        if proc.returncode != 0:
            failures.append(f"{name}: {proc.stderr.strip().splitlines()[-1:]}")
    assert failures == []
    assert "events.engine" in names and "events.rules.counters" in names
