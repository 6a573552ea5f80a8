"""Real receivers on loopback for the alert-target tests (issue 26 §2).

* :class:`HookReceiver`: an HTTP server (stdlib ``http.server`` in a thread) that checks each
  POST's ``X-Weft-Signature`` against its secret (HMAC-SHA256 of the raw body, compared in
  constant time), records what it got, and answers ``fail`` times 503 before 200;
* :class:`SyslogReceiver`: a UDP or TCP socket that reads RFC 5424 messages (UDP: one per
  datagram, RFC 5426; TCP: octet-counted frames, RFC 6587 §3.4.1) and parses each with
  :func:`parse_5424`, which refuses anything the RFC's ABNF does not allow;
* :func:`alertmanager`: Debian's ``prometheus-alertmanager`` on a free loopback port with a temp
  config and storage (a context manager yielding its base URL).
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.waits import wait_for


class HookReceiver:
    """Records POSTs as ``{"path", "headers" (lower-case keys), "body" (bytes), "signed" (bool)}``."""

    def __init__(self, secret: str = "", fail: int = 0):
        self.secret, self.fail = secret, fail
        self.got: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                headers = {k.lower(): v for k, v in self.headers.items()}
                want = "sha256=" + hmac.new(outer.secret.encode(), body, hashlib.sha256).hexdigest()
                signed = hmac.compare_digest(want, headers.get("x-weft-signature", ""))
                outer.got.append({"path": self.path, "headers": headers, "body": body, "signed": signed})
                code = 503 if outer.fail > 0 else (200 if signed else 401)
                outer.fail -= 1
                self.send_response(code)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def json(self, i: int = -1):
        return json.loads(self.got[i]["body"])

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


# -- RFC 5424 ------------------------------------------------------------------------------------
_HEADER = re.compile(
    r"<(?P<pri>\d{1,3})>(?P<version>[1-9]\d{0,2}) "
    r"(?P<timestamp>-|\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})) "
    r"(?P<hostname>[!-~]{1,255}) (?P<app>[!-~]{1,48}) (?P<procid>[!-~]{1,128}) (?P<msgid>[!-~]{1,32}) "
)


def _sd_name(text: str, i: int) -> tuple[str, int]:
    j = i
    while j < len(text) and 33 <= ord(text[j]) <= 126 and text[j] not in '= ]"':
        j += 1
    if not 1 <= j - i <= 32:
        raise ValueError(f"bad SD-NAME at {i}: {text[i : i + 40]!r}")
    return text[i:j], j


def parse_5424(message: str) -> dict:
    """Parse one RFC 5424 message strictly (ABNF of §6): ``{"pri", "facility", "severity",
    "version", "timestamp", "hostname", "app", "procid", "msgid", "sd": {id: {name: value}},
    "msg"}``. Raises ``ValueError`` on any deviation (PRI > 191, version ≠ 1, bad lengths,
    unescaped ``"``/``]``/``\\`` in a PARAM-VALUE, an SD-ID without ``@`` that is not
    IANA-registered, MSG without the BOM)."""
    m = _HEADER.match(message)
    if not m:
        raise ValueError(f"bad HEADER: {message[:80]!r}")
    pri = int(m["pri"])
    if pri > 191 or m["version"] != "1":
        raise ValueError(f"PRI {pri} / VERSION {m['version']}")
    rest = message[m.end() :]
    sd: dict[str, dict[str, str]] = {}
    if rest.startswith("-"):
        i = 1
    elif rest.startswith("["):
        i = 0
        while i < len(rest) and rest[i] == "[":
            sd_id, i = _sd_name(rest, i + 1)
            if "@" not in sd_id and sd_id not in ("timeQuality", "origin", "meta"):
                raise ValueError(f"SD-ID {sd_id!r} is neither registered nor name@number")
            params: dict[str, str] = {}
            while rest[i] == " ":
                name, i = _sd_name(rest, i + 1)
                if rest[i : i + 2] != '="':
                    raise ValueError(f"bad SD-PARAM at {i}")
                i += 2
                value = []
                while rest[i] != '"':
                    if rest[i] == "\\" and rest[i + 1] in '"\\]':
                        value.append(rest[i + 1])
                        i += 2
                    elif rest[i] in "]":
                        raise ValueError(f"unescaped ] in PARAM-VALUE at {i}")
                    else:
                        value.append(rest[i])
                        i += 1
                params[name] = "".join(value)
                i += 1
            if rest[i] != "]":
                raise ValueError(f"SD-ELEMENT not closed at {i}")
            i += 1
            sd[sd_id] = params
    else:
        raise ValueError(f"bad STRUCTURED-DATA: {rest[:40]!r}")
    msg = None
    if i < len(rest):
        if rest[i] != " ":
            raise ValueError("no SP before MSG")
        msg = rest[i + 1 :]
        if not msg.startswith("\ufeff"):
            raise ValueError("MSG without BOM")
        msg = msg[1:]
    return {
        "pri": pri, "facility": pri // 8, "severity": pri % 8, "version": 1, "timestamp": m["timestamp"],
        "hostname": m["hostname"], "app": m["app"], "procid": m["procid"], "msgid": m["msgid"], "sd": sd,
        "msg": msg,
    }  # fmt: skip


def split_octet_counted(data: bytes) -> list[str]:
    """RFC 6587 §3.4.1 frames ``MSG-LEN SP SYSLOG-MSG`` → the messages; ``ValueError`` when a
    length is not digits or the stream ends inside a frame."""
    out, i = [], 0
    while i < len(data):
        sp = data.index(b" ", i)
        length = data[i:sp]
        if not length.isdigit() or length.startswith(b"0"):
            raise ValueError(f"bad MSG-LEN {length!r}")
        end = sp + 1 + int(length)
        if end > len(data):
            raise ValueError("stream ends inside a frame")
        out.append(data[sp + 1 : end].decode("utf-8"))
        i = end
    return out


class SyslogReceiver:
    """A syslog socket on loopback (``proto`` ``udp`` or ``tcp``); ``messages`` the parsed ones,
    ``raw`` their text; ``url`` the target address (``udp://127.0.0.1:port``)."""

    def __init__(self, proto: str = "udp"):
        self.proto = proto
        self.messages: list[dict] = []
        self.raw: list[str] = []
        self.errors: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        if proto == "tcp":
            self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.url = f"{proto}://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _take(self, text: str) -> None:
        self.raw.append(text)
        try:
            self.messages.append(parse_5424(text))
        except ValueError as exc:
            self.errors.append(f"{exc}: {text!r}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if self.proto == "udp":
                    data, _ = self.sock.recvfrom(65535)
                    self._take(data.decode("utf-8"))
                    continue
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                chunks = []
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
                try:
                    for text in split_octet_counted(b"".join(chunks)):
                        self._take(text)
                except ValueError as exc:
                    self.errors.append(str(exc))

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.sock.close()


# -- Alertmanager --------------------------------------------------------------------------------
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
ALERTMANAGER_CONFIG = """\
route:
  receiver: blackhole
  group_wait: 1s
receivers:
  - name: blackhole
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def alertmanager():
    """Run ``prometheus-alertmanager`` (Debian) on loopback with a temp config and storage, in its
    own process group; yields its base URL once ``/-/ready`` answers; stops it (by its pid)."""
    tmp = tempfile.mkdtemp(prefix="weft-am-")
    with open(os.path.join(tmp, "am.yml"), "w") as fh:
        fh.write(ALERTMANAGER_CONFIG)
    port = _free_port()
    log = open(os.path.join(tmp, "am.log"), "w")
    proc = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={tmp}/am.yml", f"--storage.path={tmp}/data",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def ready():
        if proc.poll() is not None:
            raise RuntimeError(f"alertmanager exited: {open(log.name).read()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(ready, timeout=30, what="alertmanager ready")
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


def alertmanager_alerts(url: str) -> list[dict]:
    """``GET /api/v2/alerts`` of an Alertmanager (the alerts it holds, resolved ones left out)."""
    with urllib.request.urlopen(f"{url}/api/v2/alerts", timeout=5) as r:
        return json.loads(r.read())


# -- rsyslogd --------------------------------------------------------------------------------------
RSYSLOGD = shutil.which("rsyslogd") or (os.path.exists("/usr/sbin/rsyslogd") and "/usr/sbin/rsyslogd") or None
#: what rsyslogd parsed of each message, one line each (its RFC 5424 parser's properties)
RSYSLOG_FIELDS = ("facility", "severity", "hostname", "app", "msgid", "sd", "msg", "version")
RSYSLOG_CONFIG = """\
global(workDirectory="{tmp}")
module(load="imudp")
module(load="imtcp")
input(type="imudp" port="{udp}" address="127.0.0.1")
input(type="imtcp" port="{tcp}" address="127.0.0.1")
template(name="fields" type="string"
         string="%syslogfacility%|%syslogseverity%|%hostname%|%app-name%|%msgid%|%structured-data%|%msg%|%protocol-version%\\n")
action(type="omfile" file="{tmp}/out.log" template="fields")
"""


class Rsyslog:
    """A running ``rsyslogd``: ``udp_url``/``tcp_url`` (target addresses) and :meth:`received`."""

    def __init__(self, tmp: str, udp: int, tcp: int):
        self.tmp, self.udp_url, self.tcp_url = tmp, f"udp://127.0.0.1:{udp}", f"tcp://127.0.0.1:{tcp}"

    def received(self) -> list[dict]:
        """The messages written so far, as ``dict(zip(RSYSLOG_FIELDS, …))`` (MSG without its BOM)."""
        path = os.path.join(self.tmp, "out.log")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as fh:
            rows = [
                dict(zip(RSYSLOG_FIELDS, line.rstrip("\n").split("|"), strict=True))
                for line in fh
                if line.strip()
            ]
        for r in rows:
            r["msg"] = r["msg"].removeprefix("\ufeff")
        return rows


@contextlib.contextmanager
def rsyslogd():
    """Run Debian's ``rsyslogd`` in the foreground (``-n``) with a temp config, work directory and
    pid file, listening on free loopback UDP and TCP ports (imudp, imtcp: octet-counted framing is
    on by default) and writing what it parsed to a file; stops it by its pid."""
    tmp = tempfile.mkdtemp(prefix="weft-rsyslog-")
    udp, tcp = _free_port(), _free_port()
    with open(os.path.join(tmp, "rsyslog.conf"), "w") as fh:
        fh.write(RSYSLOG_CONFIG.format(tmp=tmp, udp=udp, tcp=tcp))
    log = open(os.path.join(tmp, "rsyslogd.log"), "w")
    proc = subprocess.Popen(
        [RSYSLOGD, "-n", "-f", f"{tmp}/rsyslog.conf", "-i", f"{tmp}/rsyslogd.pid"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip

    def listening():
        if proc.poll() is not None:
            raise RuntimeError(f"rsyslogd exited: {open(log.name).read()[-2000:]}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", tcp)) == 0

    try:
        wait_for(listening, timeout=20, what="rsyslogd listening")
        yield Rsyslog(tmp, udp, tcp)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
