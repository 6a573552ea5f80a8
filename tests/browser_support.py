"""Browser-test support: a real Weft server process and Debian Chromium driven by Playwright.

Fixtures (loaded from the root ``conftest.py``):

* ``weft_server_factory(**env) -> WeftServer``: starts ``manage.py serve`` (daphne ASGI + the
  in-process worker and beat) on a free loopback port, with its own SQLite database in a temp
  folder, migrated, and users ``admin``/``operator``/``viewer`` (password :data:`PASSWORD`).
  The database is a copy of a template made once per session (``migrate`` and three ``set_role``
  runs, ~10 s a server otherwise); each server still has its own copy.
* ``weft_server``: the same with the default environment.
* ``browser_page``: a Playwright (sync API) page in ``/usr/bin/chromium``.

The server is another process: browser tests set data up with ``server.manage(...)`` or the REST
API, never with pytest-django's ``db`` fixture.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.migrated import sqlite_template

BASE_DIR = Path(__file__).resolve().parents[1]
PASSWORD = "weft-test-pass"
CHROMIUM = os.environ.get("WEFT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class WeftServer:
    """A ``manage.py serve`` process on its own SQLite database (see module docstring)."""

    def __init__(self, data_dir: Path, env: dict[str, str]):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        base = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
        base.pop("DJANGO_SETTINGS_MODULE", None)
        self.env = {
            **base,
            "WEFT_DATA_DIR": str(data_dir),
            "WEFT_PRODUCTION": "0",
            "EMAIL_URL": "console://",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.proc: subprocess.Popen | None = None
        self.log_path = data_dir / "server.log"

    def manage(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess:
        """Run ``manage.py <args>`` against this server's database; returns the completed process."""
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
            )
        return proc

    def prepare(self, migrated: Path | None = None) -> None:
        """Migrate this server's database (or start it from ``migrated``, a migrated SQLite
        database: ``tests.support.migrated.sqlite_template``) and create the users
        ``admin``/``operator``/``viewer`` (``set_role --create``, one interpreter for the three)."""
        if migrated is not None and self.sqlite_path is not None:
            shutil.copyfile(migrated, self.sqlite_path)
        else:
            self.manage("migrate", "--noinput")
        calls = "".join(
            f"call_command('set_role', {user!r}, {role!r}, '--create', '--password', {PASSWORD!r})\n"
            for user, role in (("admin", "admin"), ("operator", "operator"), ("viewer", "viewer"))
        )
        self.manage("shell", "-c", "from django.core.management import call_command\n" + calls)

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file of this server (``None`` when ``WEFT_SQLITE_PATH``/``DATABASE_URL`` name another)."""
        if self.env.get("WEFT_SQLITE_PATH") or self.env.get("DATABASE_URL"):
            return None
        return self.data_dir / "weft.sqlite3"

    def start(self, timeout: float = 60, template: Path | None = None) -> WeftServer:
        """Start ``manage.py serve``; its database is a copy of ``template`` (a prepared SQLite
        file, see :func:`_weft_template_db`) when given, else prepared here. Raises
        ``AssertionError`` (with the server's log) when it exits or does not answer in ``timeout`` s."""
        if template is not None and self.sqlite_path is not None:
            shutil.copyfile(template, self.sqlite_path)
        else:
            self.prepare()
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", str(self.port)],
            cwd=BASE_DIR,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._log = log
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"weft server exited early:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"weft server did not answer in {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-5000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if getattr(self, "_log", None):
            self._log.close()


@pytest.fixture(scope="session")
def _weft_template_db(tmp_path_factory) -> Path:
    """A migrated SQLite database with the three users, made once per session: each server starts
    on a copy of it (the WAL is checkpointed into the file first, so the copy is whole). The
    migrated schema is a copy of ``tests.support.migrated``'s template (migrated once per set of
    migrations)."""
    template = WeftServer(tmp_path_factory.mktemp("weft-template"), {})
    template.prepare(migrated=sqlite_template())
    path = template.sqlite_path
    with sqlite3.connect(path) as con:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return path


@pytest.fixture
def weft_server_factory(tmp_path_factory, _weft_template_db):
    servers: list[WeftServer] = []

    def make(**env: str) -> WeftServer:
        server = WeftServer(tmp_path_factory.mktemp("weft-server"), {k: str(v) for k, v in env.items()})
        servers.append(server)
        return server.start(template=_weft_template_db)

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def weft_server(weft_server_factory) -> WeftServer:
    return weft_server_factory()


@pytest.fixture(scope="module")
def _chromium():
    """Debian's Chromium under Playwright's sync API, for one test module: the sync API keeps an
    event loop running in this thread while it lives, which Django's async guard takes for a
    coroutine (``SynchronousOnlyOperation`` in every later database test of the same xdist
    worker); stopped at the module's end, it leaves the worker's next modules a plain thread."""
    if not Path(CHROMIUM).exists() and not shutil.which(CHROMIUM):
        pytest.skip(f"browser: {CHROMIUM} is absent (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    yield browser
    browser.close()
    pw.stop()


#: Reports every Content-Security-Policy violation of a page to the test (``browser_page``).
CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (e) => {
  window.__weftCspViolation(`${e.effectiveDirective} refused ${e.blockedURI || "inline"}`
    + ` at ${e.sourceFile || document.location.href}:${e.lineNumber}`);
});
"""


@pytest.fixture
def browser_page(_chromium):
    """A page whose test fails on any Content-Security-Policy violation (the page's
    ``securitypolicyviolation`` events and Chromium's console reports of them)."""
    context = _chromium.new_context(viewport={"width": 1400, "height": 900})
    violations: list[str] = []
    context.expose_function("__weftCspViolation", lambda text: violations.append(text))
    context.add_init_script(CSP_LISTENER)
    page = context.new_page()
    page.on(
        "console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None
    )
    page.set_default_timeout(20000)
    page.csp_violations = violations
    yield page
    try:  # a round trip: reports sent before it have been delivered when it returns
        page.evaluate("() => true")
    except Exception:  # the page is gone (closed, crashed): what was reported is all there is
        pass
    context.close()
    assert not violations, "Content-Security-Policy violations:\n" + "\n".join(violations)


def login(page, server: WeftServer, user: str = "admin", password: str = PASSWORD) -> None:
    """Sign ``user`` in through the login form."""
    page.goto(f"{server.url}/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("#login-form button[type=submit]")
    page.wait_for_load_state("networkidle")


# ---- data through the server's own API (browser tests: the server is another process) --------


def topology(with_uplink: bool = True) -> str:
    """ibnetdiscover text: leaf01 (LID 1) with host01/host02, spine01 (LID 2), uplink leaf01[3]-spine01[3]."""
    leaf_uplink = '[3]\t"S-0002c90200000002"[3]\t\t# "spine01" lid 2 4xHDR\n' if with_uplink else ""
    spine_uplink = '[3]\t"S-0002c90200000001"[3]\t\t# "leaf01" lid 1 4xHDR\n' if with_uplink else ""
    hosts = ""
    leaf_hosts = ""
    for i in (1, 2):
        guid = f"0002c9030000001{i}"
        port_guid = f"0002c9030000002{i}"
        leaf_hosts += f'[{i}]\t"H-{guid}"[1]({port_guid}) \t\t# "host0{i} mlx5_0" lid {10 + i} 4xHDR\n'
        hosts += (
            f"\nvendid=0x2c9\ndevid=0x101b\nsysimgguid=0x{guid}\ncaguid=0x{guid}\n"
            f'Ca\t1 "H-{guid}"\t\t# "host0{i} mlx5_0"\n'
            f'[1]({port_guid}) \t"S-0002c90200000001"[{i}]\t\t# lid {10 + i} lmc 0 "leaf01" lid 1 4xHDR\n'
        )
    return (
        "vendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x0002c90200000001\n"
        "switchguid=0x0002c90200000001(0002c90200000001)\n"
        'Switch\t8 "S-0002c90200000001"\t\t# "leaf01" base port 0 lid 1 lmc 0\n'
        + leaf_hosts
        + leaf_uplink
        + "\nvendid=0x2c9\ndevid=0xcf08\nsysimgguid=0x0002c90200000002\n"
        "switchguid=0x0002c90200000002(0002c90200000002)\n"
        'Switch\t8 "S-0002c90200000002"\t\t# "spine01" base port 0 lid 2 lmc 0\n' + spine_uplink + hosts
    )


def token(server, user: str = "admin") -> str:
    """A new API token of ``user`` (password :data:`PASSWORD`) on ``server``, from the server's own
    ``POST /api/accounts/users/token/`` with HTTP Basic (a sign-in, audited): one HTTP round trip,
    where ``manage.py drf_create_token`` started a Python process for each (~2 s)."""
    basic = base64.b64encode(f"{user}:{PASSWORD}".encode()).decode()
    req = urllib.request.Request(
        f"{server.url}/api/accounts/users/token/",
        method="POST",
        data=b"{}",
        headers={"Authorization": f"Basic {basic}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())["token"]


def api(server, tok: str, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(
        f"{server.url}{path}",
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {tok}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def import_topology(server, tok: str, text: str) -> None:
    # the file is the whole fabric: removing the uplink (a third of its links) is meant
    code, body = api(
        server, tok, "POST", "/api/fabric/fabrics/import/", {"fabric": "lab", "text": text, "replace": True}
    )
    assert code == 201, body
