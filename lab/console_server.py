"""A running lab's cable actions from another process: a UNIX socket next to the lab's files.

ibsim's console is the stdin of the process that started it (the demo, ``fabric_lab``), so an
admin in another shell cannot pull a cable. :class:`ConsoleServer` listens on
``<workdir>/console.sock`` (mode 0600, in the lab's private temp directory) and runs one request
per connection; ``manage.py lab_console SOCKET unlink NODE [PORT]`` is its client
(:func:`request`).

Requests, one line each (shell-like quoting, so descriptions with spaces work):

- ``unlink NODE [PORT]`` / ``relink NODE [PORT]``: :meth:`lab.Lab.unlink` / :meth:`lab.Lab.relink`
  (ibsim ``Unlink``/``ReLink``: the SM gets trap 128, the traffic player stops writing into the
  cable). NODE is a node id, description or GUID of the lab's netfile; PORT the port number (all
  the node's linked ports when absent).
  ``relink NODE PORT`` of a port whose cable is in place (disabled with ``ibportstate``) trains
  its link again (:meth:`lab.Lab.retrain`).
- ``retrain NODE PORT``: :meth:`lab.Lab.retrain` (what a real port does once enabled; Weft asks
  for it after a port enable on a lab fabric, ``lab.receivers``).
- ``raw COMMAND``: any ibsim console command (``PerformanceSet``, ``Error``...), as
  :meth:`lab.Lab.console`.

Answers: ``ok[: <ibsim's answer>]`` or ``error: <why>`` (one UTF-8 text, then the server closes
the connection).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import threading
from pathlib import Path

from core.hints import manage_py

from .console_client import request  # noqa: F401  (the client, here as before)
from .core import LabError
from .netfile import SWITCH

log = logging.getLogger(__name__)

#: bytes of one request at most (ibsim's own console line is 127 bytes; a description may be long)
MAX_REQUEST = 4096


def handle_request(lab, line: str) -> str:
    """Run one request ``line`` on ``lab``; return the answer text (``ok...`` or ``error: ...``).
    Never raises for a bad request or a refused ibsim command."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        return f"error: {exc}"
    if not words:
        return "error: empty request (unlink NODE [PORT], relink NODE [PORT], retrain NODE PORT, raw COMMAND)"
    verb, args = words[0].lower(), words[1:]
    try:
        if verb == "retrain":
            if len(args) != 2 or not args[1].isdigit():
                return "error: retrain NODE PORT"
            lab.retrain(args[0], int(args[1]))
            return "ok"
        if verb in ("unlink", "relink"):
            if not 1 <= len(args) <= 2:
                return f"error: {verb} NODE [PORT]"
            port = None
            if len(args) == 2:
                if not args[1].isdigit():
                    return f"error: port {args[1]!r} is not a number"
                port = int(args[1])
            (lab.unlink if verb == "unlink" else lab.relink)(args[0], port)
            return "ok"
        if verb == "raw":
            command = line.strip()[3:].strip()
            if not command:
                return "error: raw COMMAND"
            answer = lab.console(command).strip()
            return f"ok: {answer}" if answer else "ok"
    except LabError as exc:  # LabConsoleError too: ibsim refused it
        return f"error: {exc}"
    return f"error: unknown request {verb!r} (unlink NODE [PORT], relink NODE [PORT], retrain NODE PORT, raw COMMAND)"


class ConsoleServer:
    """Serve ``lab``'s cable actions on the UNIX socket ``path`` (a daemon thread; one request per
    connection, handled in turn). ``start()`` returns self; ``stop()`` closes and removes the
    socket. Raises ``OSError`` from ``start()`` when the socket cannot be bound."""

    def __init__(self, lab, path: str | Path):
        self.lab = lab
        self.path = Path(path)
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ConsoleServer:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # created 0600: the lab's owner only
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        sock.listen(8)
        self._sock = sock
        self.lab.console_socket = str(self.path)
        self._thread = threading.Thread(target=self._serve, name="weft-lab-console", daemon=True)
        self._thread.start()
        return self

    def _serve(self) -> None:
        sock = self._sock
        while sock is not None:
            try:
                conn, _ = sock.accept()
            except OSError:  # closed by stop()
                return
            with conn:
                try:
                    conn.settimeout(10.0)
                    data = b""
                    while b"\n" not in data and len(data) < MAX_REQUEST:
                        chunk = conn.recv(MAX_REQUEST)
                        if not chunk:
                            break
                        data += chunk
                    line = data.split(b"\n", 1)[0].decode("utf-8", "replace")
                    answer = handle_request(self.lab, line)
                    conn.sendall(answer.encode() + b"\n")
                except OSError as exc:  # the client went away: nothing to answer
                    log.debug("lab console: %s", exc)

    def stop(self) -> None:
        sock, self._sock = self._sock, None
        if getattr(self.lab, "console_socket", None) == str(self.path):
            self.lab.console_socket = None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        if self._thread is not None:
            self._thread.join(timeout=5)


def example(lab, path: str | Path) -> str:
    """The command line that pulls one leaf-to-host cable of ``lab`` through the socket ``path``
    (what the demo and ``fabric_lab`` print), e.g. ``.venv/bin/python manage.py lab_console
    /tmp/…/console.sock unlink rail0-leaf-01 5``. The cable is not one of the hosts the lab's
    tools (``SIM_HOST``) or OpenSM run on (pulling those cuts the management host off the fabric:
    every link would look down) nor the last host by name (where Weft's notice listener attaches,
    ``fabric.services.notices.lab_listener_hosts``)."""
    special = {str(lab.tool_env.get("SIM_HOST", ""))} | {sm.node.node_id for sm in lab._sms}
    cas = sorted(
        (n for n in lab.net.cas if n.node_id not in special and n.description not in special),
        key=lambda n: n.description,
    )[:-1]
    if cas:
        host = cas[len(cas) // 2]
        for a, b in lab.net.links:
            for (node_id, port), (other_id, _) in ((a, b), (b, a)):
                node = lab.net.find(node_id)
                if other_id == host.node_id and node is not None and node.kind == SWITCH:
                    return f"{manage_py()} lab_console {path} unlink {shlex.quote(node.description)} {port}"
    return f"{manage_py()} lab_console {path} unlink NODE PORT"
