"""The house (issue 27; ``docs/design.md`` "The house"): which app may import which, and no import
cycle anywhere.

* :data:`ALLOWED`: app → the apps it may import, at module level *and* inside functions. Apps sit on
  :data:`FLOORS` (``core`` the kernel at the bottom, ``weft`` the composition root on top); an
  arrow down is allowed by the table, an arrow up only with its reason in :data:`UPWARD`.
* No import cycle in the whole project, counting function-local imports too: a function-local
  import only defers an import-time dependency, it never hides a design cycle.
* No import cycle inside an app (issue 8), and every events module imports on its own in a fresh
  interpreter (after ``django.setup()``).
* No module imports another module's private names (``from x import _y``): what two modules share
  is public in one of them (issue 27). Test modules may reach into the module they test.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = [
    "core",
    "outbound",
    "accounts",
    "fabric",
    "lab",
    "telemetry",
    "events",
    "pools",
    "devices",
    "routing",
    "scheduler",
    "ufm",
    "weft",
]

#: the floor of each app: it imports apps below it (those :data:`ALLOWED` names)
FLOORS = {
    "core": 0,  # the kernel: errors, fields, locks, bulk writes, API bases, realtime; imports no app
    "outbound": 1,  # signed outbound webhooks (issue 24): any app sends through it; imports no app
    "accounts": 1,  # roles, permissions, the audit log, tokens
    "fabric": 2,  # topology, discovery, SM, partitions, the map's read model
    "lab": 3,  # the fabric lab (registers lab fabrics through fabric.services)
    "telemetry": 3,  # port counters, rates, sweeps, heatmap
    "events": 4,  # events, alarms, rules over topology and counters, mail
    "pools": 5,  # GPU inventory, tenants, pools, allocations
    "devices": 5,  # Ethernet devices over SNMP
    "routing": 5,  # the switches' forwarding tables, paths, the routing report
    "scheduler": 6,  # locality, placement, the job queue
    "ufm": 7,  # the UFM-compatible REST API over fabric, events and scheduler
    "weft": 8,  # the composition root: settings, urls, asgi, celery, commands spanning apps
}

#: app → the apps it may import (module level and inside functions)
ALLOWED = {
    "core": set(),
    "outbound": {"core"},
    "accounts": {"core"},
    "fabric": {"core", "accounts", "events"},
    "lab": {"core", "fabric"},
    "telemetry": {"core", "accounts", "fabric", "events"},
    "events": {"core", "accounts", "fabric", "telemetry", "outbound"},
    "pools": {"core", "accounts", "fabric", "events"},
    "devices": {"core", "accounts", "fabric", "telemetry", "events"},
    "routing": {"core", "fabric", "events"},
    "scheduler": {"core", "accounts", "fabric", "telemetry", "events", "pools", "outbound", "routing"},
    "ufm": {"core", "accounts", "fabric", "events", "scheduler"},
    "weft": {
        "core",
        "fabric",
        "lab",
        "telemetry",
        "events",
        "pools",
        "devices",
        "scheduler",
        "ufm",
    },
}

#: every arrow that runs up a floor, with its reason
UPWARD = {
    (
        "fabric",
        "events",
    ): "a writer records its events in its own transaction (events.services.record_events, "
    "EventSpec), declares its event types (events.registry), reads the admin's policy of one (SM lost: "
    "events.policies.policy_for); its pages list a node's events (events.models.Event). Events hang "
    "on fabrics (Event.fabric), so the events app sits above the fabric",
    ("telemetry", "events"): "the sweep records its events in its own transaction and declares its event "
    "types, as the fabric does; the counter rules (events) read the sweep's PortCounters, so events "
    "sit above telemetry",
}


def _modules(app: str) -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / app).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if "tests" in parts or "migrations" in parts:
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
                subs = {f"{mod}.{a.name}" for a in node.names}
                # ``from pkg import module`` imports the module (its package runs first in any case)
                targets.update(subs if subs <= known else {mod} | subs)
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
        if t and t != name and not name.startswith(t + "."):  # a module's own package runs first
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


def _project_graph(local: bool) -> dict[str, set[str]]:
    modules = {name: path for app in APPS for name, path in _modules(app).items()}
    return {name: _edges(name, path, set(modules), local=local) for name, path in modules.items()}


def _app_arrows() -> dict[tuple[str, str], list[str]]:
    """``(app, app) → ["module → module", …]`` over module-level and function-local imports."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for name, targets in _project_graph(local=True).items():
        for target in targets:
            a, b = name.split(".")[0], target.split(".")[0]
            if a != b:
                arrows.setdefault((a, b), []).append(f"{name} → {target}")
    return arrows


def test_every_app_imports_only_what_the_table_allows():
    arrows = _app_arrows()
    refused = {f"{a} → {b}": sorted(mods)[:3] for (a, b), mods in arrows.items() if b not in ALLOWED[a]}
    assert refused == {}
    unused = {f"{a} → {b}" for a, targets in ALLOWED.items() for b in targets if (a, b) not in arrows}
    assert unused == set(), "the table allows arrows no code draws: remove them"
    assert ("fabric", "events") in arrows and ("weft", "fabric") in arrows


def test_the_table_names_every_upward_arrow_and_its_reason():
    assert set(FLOORS) == set(ALLOWED) == set(APPS)
    assert {p.name for p in ROOT.iterdir() if (p / "apps.py").exists()} <= set(APPS)  # every app has a floor
    up = {(a, b) for a, targets in ALLOWED.items() for b in targets if FLOORS[b] >= FLOORS[a]}
    assert up == set(UPWARD)
    assert all(len(reason) > 40 for reason in UPWARD.values())
    assert ALLOWED["core"] == set() and FLOORS["weft"] == max(FLOORS.values())
    assert not any("weft" in targets for app, targets in ALLOWED.items() if app != "weft")


@pytest.mark.parametrize("local", [False, True], ids=["module-level", "with-function-local"])
def test_no_import_cycle_in_the_project(local):
    """Across every app, counting function-local imports too: none hides a design cycle."""
    graph = _project_graph(local=local)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])
    assert len(graph) > 300 and "core.locks" in graph and "ufm.views" in graph


@pytest.mark.parametrize("app", APPS)
def test_no_module_level_import_cycle_inside_app(app):
    graph = _graph(app, local=False)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])


def test_events_has_no_import_cycle_even_through_function_local_imports():
    """The events app was split so that nothing in it needs a function-local import to break a
    cycle: policies → engine → rules → tasks → signals is a DAG even counting them."""
    graph = _graph("events", local=True)
    assert _cycle(graph) is None, " → ".join(_cycle(graph) or [])
    assert "events.receivers" in graph["events.apps"] and "events.engine" not in graph["events.policies"]


def test_no_module_imports_another_modules_private_names():
    offenders = []
    for app in APPS:
        for name, path in _modules(app).items():
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom):
                    private = [
                        a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                    ]
                    if private:
                        offenders.append(
                            f"{name}:{node.lineno} {'.' * node.level}{node.module or ''} {private}"
                        )
    assert offenders == []


def test_cycle_finder_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


#: Imports each module named on the command line first, in a fork of one interpreter that has run
#: ``django.setup()`` and nothing else: each child starts from exactly the state a fresh interpreter
#: has after ``django.setup()`` (the fork copies it), at the cost of one setup for all the modules.
#: Prints ``name<TAB>ok`` or ``name<TAB>the error's last line`` per module.
_IMPORT_ALONE = """
import importlib, os, sys, traceback
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")
import django
django.setup()
sys.stdout.flush()
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            message = "ok"
        except BaseException:
            message = traceback.format_exc().strip().splitlines()[-1] or "failed"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    message = b"".join(chunks).decode() or f"child ended with status {status}"
    print(f"{name}\t{message}", flush=True)
"""


def _import_alone(names: list[str], path: Path | None = None) -> dict[str, str]:
    """``{module: "ok" | its error's last line}``: each module imported first after
    ``django.setup()`` (see :data:`_IMPORT_ALONE`); ``path`` is put on ``PYTHONPATH``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(path or ""), str(ROOT)])))
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALONE, *names],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(line.split("\t", 1) for line in proc.stdout.splitlines() if "\t" in line)


def test_each_events_module_imports_alone(tmp_path):
    """Every module of the events app, imported first in a fresh interpreter after django.setup()
    (a fork per module of one interpreter that ran the setup: the same starting state)."""
    names = sorted(_modules("events"))
    assert "events.engine" in names and "events.rules.counters" in names
    # the harness tells a module that fails on its own: one whose import raises, and one that only
    # imports after another module was imported (each child starts from the setup, not the last child)
    (tmp_path / "weft_probe_first.py").write_text("import sys\nsys.modules['weft_probe_left'] = sys\n")
    (tmp_path / "weft_probe_second.py").write_text("import weft_probe_left\n")
    (tmp_path / "weft_probe_raises.py").write_text("raise RuntimeError('refused')\n")
    probes = ["weft_probe_first", "weft_probe_second", "weft_probe_raises"]
    results = _import_alone(probes + names, tmp_path)
    assert results.pop("weft_probe_first") == "ok"
    assert results.pop("weft_probe_second") == "ModuleNotFoundError: No module named 'weft_probe_left'"
    assert results.pop("weft_probe_raises") == "RuntimeError: refused"
    failures = {name: message for name, message in results.items() if message != "ok"}
    assert failures == {}
    assert sorted(results) == names


def test_test_modules_import_only_support_modules():
    """Shared test data and helpers live in ``tests/support`` (or the conftest/``*_support``
    plugins), never in another test module: importing a ``test_*`` module runs its collection-time
    code again and couples two files' fixtures (issue 27). Every import of every test module, at
    module level and inside functions, relative ones included."""
    offenders = []
    for path in sorted(ROOT.rglob("test_*.py")):
        if ".venv" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + ([a.name for a in node.names] if node.level else [])
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(part.startswith("test_") for name in names for part in name.split(".")):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], offenders
