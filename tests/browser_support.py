"""Browser-test support: a real Weft server process and Debian Chromium driven by Playwright.

Fixtures (loaded from the root ``conftest.py``):

* ``weft_server_factory(**env) -> WeftServer``: starts ``manage.py serve`` (daphne ASGI + the
  in-process worker and beat) on a free loopback port, with its own SQLite database in a temp
  folder, migrated, and users ``admin``/``operator``/``viewer`` (password :data:`PASSWORD`).
* ``weft_server``: the same with the default environment.
* ``browser_page``: a Playwright (sync API) page in ``/usr/bin/chromium``.

The server is another process: browser tests set data up with ``server.manage(...)`` or the REST
API, never with pytest-django's ``db`` fixture.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

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

    def start(self, timeout: float = 60) -> WeftServer:
        self.manage("migrate", "--noinput")
        for user, role in (("admin", "admin"), ("operator", "operator"), ("viewer", "viewer")):
            self.manage("set_role", user, role, "--create", "--password", PASSWORD)
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


@pytest.fixture
def weft_server_factory(tmp_path_factory):
    servers: list[WeftServer] = []

    def make(**env: str) -> WeftServer:
        server = WeftServer(tmp_path_factory.mktemp("weft-server"), {k: str(v) for k, v in env.items()})
        servers.append(server)
        return server.start()

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def weft_server(weft_server_factory) -> WeftServer:
    return weft_server_factory()


@pytest.fixture(scope="session")
def _chromium():
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
