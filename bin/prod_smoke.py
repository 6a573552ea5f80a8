"""Production smoke test (``bin/prod-smoke``, run by ``bin/test``): the README's production commands,
as written, against the local PostgreSQL and Redis, then what a user and an integration do.

1. The environment of README "Production deployment" with local values: a fresh database
   ``weft_smoke_<pid>`` on 127.0.0.1:5432 (user postgres, trust), Redis db 12 (``--redis-db N``:
   another, so that two smoke runs on one machine do not flush each other's broker), a generated
   ``SECRET_KEY`` and superuser password, ``ALLOWED_HOSTS=weft.example.org``, a free ``PORT``,
   ``EMAIL_URL`` a real SMTP server on loopback (aiosmtpd, started here; ``WEFT_ALERT_EMAILS``
   unset, as in the README, so alarm mail goes to the Admin the block creates), and short beat
   periods (discovery 4 s, sweeps 2 s) so the lab is discovered and swept at once.
2. The lines of the README block after ``<!-- prod-commands`` run with ``bash -c``, in order:
   ``daphne``, ``celery`` and ``listen_notices`` lines in the background, each in its own session (process group),
   the others in the foreground (a non-zero exit fails the smoke test).
3. A lab fabric: ``manage.py fabric_lab --fat-tree ... --register lab`` (background).
4. Checks over HTTP as the TLS reverse proxy would send them (``Host: weft.example.org``,
   ``X-Forwarded-Proto: https``): the login page (200) and every hashed static file it links (200),
   a wrong password (200, a form error), the right one (302), the dashboard, an API token from the
   session, the API with the token (the lab fabric), a beat-driven sweep of the lab (its heatmap's
   latest sweep, ok, every port read) and the heatmap websocket (a ``heatmap.delta`` after a sweep).
   Then a lab cable is pulled (the ``lab_console ... unlink`` line ``fabric_lab`` prints) and the
   Critical "Link down" mail reaches the SMTP server, addressed to the Admin
   (``admin@example.org``, ``createsuperuser --email`` of the block).
5. Everything stopped as the systemd units of ``deploy/systemd`` stop it (``KillMode=mixed``:
   SIGTERM to each main process, SIGKILL to its process group once it exited or after 20 s; a
   worker must be gone within its grace); what each README role logged from its SIGTERM on has no
   ERROR line and no traceback (issue 25: a stopped worker logged ``WorkerLostError``); the
   database dropped, its Redis db flushed, the temp folder removed.

Prints one line per step with its time; exit status 0 when everything passed. ``--keep`` keeps the
temp folder (logs) for a look.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parents[1]
PY = str(ROOT / ".venv" / "bin" / "python")
HOST = "weft.example.org"
ORIGIN = f"https://{HOST}"
REDIS_DB = 12
LAB = "2:leaves=2,spines=1,hosts=2,speed=HDR"
SERVERS = ("daphne", "celery")
T0 = time.monotonic()


class SmokeError(AssertionError):
    """A check failed; the message says which and what was seen."""


def say(text: str) -> None:
    print(f"prod-smoke [{time.monotonic() - T0:6.1f}s] {text}", flush=True)


def wait_for(condition, timeout: float, what: str, interval: float = 0.25):
    """Poll ``condition()`` until it returns a true value (returned); SmokeError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = condition()
        except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
            value, last_error = None, exc
        if value:
            return value
        time.sleep(interval)
    raise SmokeError(
        f"{what}: not within {timeout:g} s" + (f" (last error: {last_error})" if last_error else "")
    )


def readme_commands() -> list[str]:
    """The command lines of the README block after the ``<!-- prod-commands`` marker."""
    text = (ROOT / "README.md").read_text()
    start = text.index("<!-- prod-commands")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    if block is None:
        raise SmokeError("README: no ```sh block after <!-- prod-commands")
    return [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """Background processes, each the leader of its own session; stopped by process group."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.marks: dict[str, int] = {}

    def stop_errors(self, names) -> dict[str, list[str]]:
        """The ERROR and traceback lines each of ``names`` logged after its SIGTERM (:meth:`stop`)."""
        out = {}
        for name in names:
            path = self.logs / f"{name}.log"
            with path.open("rb") as f:
                f.seek(self.marks.get(name, 0))
                text = f.read().decode(errors="replace")
            bad = [line for line in text.splitlines() if re.search(r"\bERROR\b|Traceback", line)]
            if bad:
                out[name] = bad[:20]
        return out

    def start(self, name: str, command: str, env: dict[str, str]) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.procs.append((name, proc))
        return proc

    def tail(self, name: str, lines: int = 30) -> str:
        path = self.logs / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise SmokeError(f"{name} exited with {proc.returncode}:\n{self.tail(name)}")

    def stop(self, timeout: float = 20.0) -> dict[str, float]:
        """SIGTERM every main process (newest first, the lab last), SIGKILL its group once it exited or after
        ``timeout`` (systemd's ``KillMode=mixed``); returns the seconds each took to exit. Where
        each log stood at the SIGTERM is kept for :meth:`stop_errors`."""
        took: dict[str, float] = {}
        # the lab (the fabric) last: Weft's roles stop while their fabric still answers, as on a site
        order = [p for p in reversed(self.procs) if p[0] != "lab"] + [p for p in self.procs if p[0] == "lab"]
        for name, proc in order:
            path = self.logs / f"{name}.log"
            self.marks[name] = path.stat().st_size if path.exists() else 0
            if proc.poll() is None:
                t0 = time.monotonic()
                try:
                    os.kill(proc.pid, signal.SIGTERM)  # ``exec``: the program itself
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
                    took[name] = float("inf")
                    continue
                took[name] = round(time.monotonic() - t0, 1)
            try:  # whatever is left in the group (a worker's pool processes)
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return took


class Client:
    """HTTP/1.1 to daphne as the TLS proxy would forward it; keeps cookies itself (they are Secure)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cookies: dict[str, str] = {}

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        head = {"Host": HOST, "X-Forwarded-Proto": "https", **(headers or {})}
        if self.cookies:
            head["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn.request(method, path, body=body, headers=head)
        resp = conn.getresponse()
        data = resp.read()
        for header, value in resp.getheaders():
            if header.lower() == "set-cookie":
                name, _, rest = value.partition("=")
                self.cookies[name.strip()] = rest.split(";", 1)[0]
        conn.close()
        return resp, data

    def get(self, path: str, **headers):
        return self.request("GET", path, headers=headers)

    def post_form(self, path: str, fields: dict[str, str]):
        body = urlencode(fields).encode()
        return self.request(
            "POST",
            path,
            body,
            {"Content-Type": "application/x-www-form-urlencoded", "Origin": ORIGIN, "Referer": ORIGIN + path},
        )


def expect(resp, data: bytes, status: int, what: str) -> str:
    if resp.status != status:
        raise SmokeError(f"{what}: HTTP {resp.status}, expected {status}: {data[:600]!r}")
    return data.decode("utf-8", "replace")


def check_site(client: Client, password: str, fabric_name: str, timeout: float) -> dict:
    """The user and integration checks (module docstring, step 4). Returns facts for the summary."""
    resp, data = client.get("/accounts/login/")
    page = expect(resp, data, 200, "login page")
    assets = sorted(set(re.findall(r'(?:src|href)="(/static/[^"]+)"', page)))
    if not assets or not all(re.search(r"\.[0-9a-f]{12}\.\w+$", a) for a in assets):
        raise SmokeError(f"login page: static URLs without hashed names: {assets}")
    for url in assets:
        expect(*client.get(url), 200, f"static file {url}")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    wrong = expect(
        *client.post_form(
            "/accounts/login/", {"csrfmiddlewaretoken": token, "username": "admin", "password": "wrong"}
        ),
        200,
        "wrong password (a form error, not a 500)",
    )
    if "didn't match" not in wrong:
        raise SmokeError("wrong password: no form error on the page")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', wrong).group(1)
    resp, data = client.post_form(
        "/accounts/login/", {"csrfmiddlewaretoken": token, "username": "admin", "password": password}
    )
    expect(resp, data, 302, "sign in")
    expect(*client.get("/"), 200, "dashboard after sign-in")
    resp, data = client.request(
        "POST",
        "/api/accounts/users/token/",
        b"",
        {"X-CSRFToken": client.cookies.get("csrftoken", ""), "Origin": ORIGIN, "Referer": ORIGIN + "/"},
    )
    api_token = json.loads(expect(resp, data, 200, "API token"))["token"]
    bearer = Client(client.port)  # no session: the token alone

    def fabric_id():
        resp, data = bearer.get(
            "/api/fabric/fabrics/?name=" + fabric_name, Authorization=f"Token {api_token}"
        )
        rows = json.loads(expect(resp, data, 200, "API fabrics with the token"))
        rows = rows.get("results", rows) if isinstance(rows, dict) else rows
        return rows[0]["id"] if rows else None

    fid = wait_for(fabric_id, timeout, f"API: fabric {fabric_name!r} registered by the lab")

    def swept():
        resp, data = bearer.get(f"/api/fabric/heatmap/{fid}/", Authorization=f"Token {api_token}")
        sweep = json.loads(expect(resp, data, 200, "API heatmap")).get("sweep")
        return sweep if sweep and sweep["status"] == "ok" and sweep["ports"] > 0 else None

    sweep = wait_for(swept, timeout, "a beat-driven sweep of the lab (discovered first)")
    message = websocket_delta(client, fid, timeout)
    return {"fabric": fid, "sweep": sweep, "ws": message["type"], "assets": len(assets)}


def websocket_delta(client: Client, fabric_id: int, timeout: float) -> dict:
    """Open ``ws/heatmap/<id>/`` with the session (as the browser behind the proxy) and wait for a
    ``heatmap.delta`` (sent after each sweep, through the Redis channel layer)."""
    from websockets.sync.client import connect

    sock = socket.create_connection(("127.0.0.1", client.port), timeout=10)
    cookie = "; ".join(f"{k}={v}" for k, v in client.cookies.items())
    deadline = time.monotonic() + timeout
    with connect(
        f"ws://{HOST}/ws/heatmap/{fabric_id}/",
        sock=sock,
        origin=ORIGIN,
        additional_headers={"Cookie": cookie, "X-Forwarded-Proto": "https"},
        open_timeout=10,
    ) as ws:
        while time.monotonic() < deadline:
            try:
                message = json.loads(ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            except TimeoutError:
                break
            if message.get("type") == "heatmap.delta":
                return message
    raise SmokeError(f"websocket: no heatmap.delta within {timeout:g} s")


ADMIN_EMAIL = "admin@example.org"  # createsuperuser --email in the README block


class Mailbox:
    """A real SMTP server on loopback (aiosmtpd): the messages it received, as
    ``email.message.Message``."""

    def __init__(self) -> None:
        from aiosmtpd.controller import Controller

        self.messages: list = []
        mailbox = self

        class Handler:
            async def handle_DATA(self, server, session, envelope):
                import email

                message = email.message_from_bytes(envelope.content)
                message["X-Rcpt-To"] = ", ".join(envelope.rcpt_tos)
                mailbox.messages.append(message)
                return "250 OK"

        self.controller = Controller(Handler(), hostname="127.0.0.1", port=free_port())

    def start(self) -> Mailbox:
        self.controller.start()
        return self

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.controller.port}"

    def stop(self) -> None:
        self.controller.stop()


def pull_cable_and_receive_the_mail(procs: Processes, mailbox: Mailbox, timeout: float) -> str:
    """Run the ``lab_console ... unlink NODE PORT`` line the lab printed; return the subject of
    the Critical link-down mail the SMTP server receives for the Admin."""
    line = next(
        (
            ln.strip()
            for ln in procs.tail("lab", 400).splitlines()
            if " lab_console " in ln and " unlink " in ln
        ),
        None,
    )
    if line is None or "NODE PORT" in line:
        raise SmokeError(f"lab: no cable to pull in its output:\n{procs.tail('lab')}")
    done = subprocess.run(line, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SmokeError(f"{line}\nexited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")

    def critical():
        for message in mailbox.messages:
            subject = str(message["Subject"])
            if subject.startswith("[Weft CRITICAL]") and "Link down" in subject:
                if ADMIN_EMAIL not in message["X-Rcpt-To"]:
                    raise SmokeError(
                        f"alarm mail {subject!r} went to {message['X-Rcpt-To']}, not {ADMIN_EMAIL}"
                    )
                return subject
        return None

    subject = wait_for(
        critical, timeout, f"the Critical link-down mail to {ADMIN_EMAIL} (pulled: {line.split()[-2:]})"
    )
    return " ".join(subject.split())  # the header unfolded


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the temp folder (logs)")
    ap.add_argument("--timeout", type=float, default=90.0, help="seconds for each wait")
    ap.add_argument(
        "--redis-db", type=int, default=REDIS_DB, metavar="N",
        help=f"the Redis db to use and flush (default {REDIS_DB}; another for a second run on one machine)",
    )  # fmt: skip
    args = ap.parse_args(argv)
    redis_db = args.redis_db

    tmp = Path(tempfile.mkdtemp(prefix="weft-prod-smoke."))
    db = f"weft_smoke_{os.getpid()}"
    password = secrets.token_urlsafe(18)
    port = free_port()
    mailbox = Mailbox().start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "DJANGO_"))}
    env.pop("DATABASE_URL", None)
    env.update(
        WEFT_PRODUCTION="1",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:5432/{db}",
        REDIS_URL=f"redis://127.0.0.1:6379/{redis_db}",
        SECRET_KEY=secrets.token_urlsafe(50),
        ALLOWED_HOSTS=HOST,
        CSRF_TRUSTED_ORIGINS=ORIGIN,
        EMAIL_URL=mailbox.url,
        WEFT_BASE_URL=ORIGIN,
        DJANGO_SUPERUSER_PASSWORD=password,
        PORT=str(port),
        WEFT_DATA_DIR=str(tmp / "data"),
        STATIC_ROOT=str(tmp / "static"),
        WEFT_DISCOVERY_INTERVAL_S="4",
        WEFT_POLL_INTERVAL_S="2",
        WEFT_SHUTDOWN_GRACE_S="3",
    )
    if os.environ.get("WEFT_REALDATA"):
        env["WEFT_REALDATA"] = os.environ["WEFT_REALDATA"]
    (tmp / "logs").mkdir()
    procs = Processes(tmp / "logs")
    psql = ["psql", "-h", "127.0.0.1", "-U", "postgres", "-w", "-v", "ON_ERROR_STOP=1", "-qc"]
    redis_flush = [PY, "-c", f"import redis; redis.Redis(db={redis_db}).flushdb()"]
    ok = False
    try:
        subprocess.run([*psql, f'CREATE DATABASE "{db}"', "postgres"], check=True, timeout=60)
        subprocess.run(redis_flush, check=True, timeout=30)
        say(f"database {db}, Redis db {redis_db}, port {port}, temp {tmp}")
        for n, line in enumerate(readme_commands()):
            program = Path(line.split()[0]).name
            if program in SERVERS or "listen_notices" in line.split("#")[0]:
                kind = {"celery": line.split()[3], "daphne": "asgi"}.get(program, "notices")
                name = f"{n}-{program}-{kind}"
                procs.start(name, line, env)
                say(f"started  {line.split('#')[0].strip()}")
                continue
            t0 = time.monotonic()
            done = subprocess.run(
                ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
            )
            if done.returncode != 0:
                raise SmokeError(f"{line}\nexited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}")
            say(f"ran      {line.split('#')[0].strip()} ({time.monotonic() - t0:.1f}s)")
        procs.start("lab", f"{PY} manage.py fabric_lab --fat-tree {LAB} --register lab", env)
        wait_for(lambda: "Weft fabric 'lab'" in procs.tail("lab", 200), args.timeout, "lab fabric registered")
        say("lab fabric up and registered as 'lab'")
        client = Client(port)
        wait_for(lambda: client.get("/accounts/login/")[0].status == 200, args.timeout, "daphne answering")
        procs.check_alive()
        facts = check_site(client, password, "lab", args.timeout)
        procs.check_alive()
        say(
            f"login page + {facts['assets']} hashed static files, wrong/right password, API token, "
            f"fabric {facts['fabric']}: sweep {facts['sweep']['id']} ok ({facts['sweep']['ports']} ports), "
            f"websocket {facts['ws']}"
        )
        subject = pull_cable_and_receive_the_mail(procs, mailbox, args.timeout)
        say(f"cable pulled: mail received by {ADMIN_EMAIL}: {subject}")
        ok = True
    except (SmokeError, subprocess.SubprocessError, OSError) as exc:
        say(f"FAILED: {exc}")
        for name, _ in procs.procs:
            print(f"---- {name} (last lines)\n{procs.tail(name)}", flush=True)
    finally:
        took = procs.stop()
        mailbox.stop()
        say("stopped (seconds to exit after SIGTERM): " + ", ".join(f"{k} {v}" for k, v in took.items()))
        slow = [k for k, v in took.items() if v == float("inf")]
        if slow:
            say(f"FAILED: did not stop within 20 s of SIGTERM: {', '.join(slow)}")
            ok = False
        errors = procs.stop_errors(name for name, _ in procs.procs if name != "lab")
        for name, lines in errors.items():
            say(f"FAILED: {name} logged errors after SIGTERM:\n" + "\n".join(lines))
            ok = False
        subprocess.run([*psql, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)', "postgres"], timeout=60)
        subprocess.run(redis_flush, timeout=30)
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    say("passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
