"""The client side of a lab's console socket (``lab.console_server``), without Django.

``manage.py lab_console SOCKET VERB ARGS...`` is what an admin types in a second shell to pull a
cable of the demo's lab. It used to start Django first (every app, the settings, the database
layer) to send one line over a UNIX socket, seconds on the demo's busy machine (issue 26 §4:
13-17 s together with the console lock); ``manage.py`` hands this verb to :func:`main` before
Django starts. The management command (``lab.management.commands.lab_console``, for
``call_command`` and ``--help`` in the list of commands) builds the same line (:func:`request_line`).
"""

from __future__ import annotations

import argparse
import shlex
import socket
import sys
from pathlib import Path

#: the request verbs (``lab.console_server.handle_request``)
VERBS = ("unlink", "relink", "retrain", "raw")


def request_line(verb: str, words: list[str]) -> str:
    """The console request for ``verb`` with ``words`` (quoted for ``shlex`` on the server's side;
    a ``raw`` command goes as typed)."""
    return " ".join([verb, *(shlex.quote(w) if verb != "raw" else w for w in words)])


def request(path: str | Path, line: str, timeout: float = 30.0) -> str:
    """Send one request ``line`` to the console server on ``path``; return its answer.
    Raises ``OSError`` when no lab listens there (or it does not answer in ``timeout`` s)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        sock.sendall(line.encode() + b"\n")
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data.decode("utf-8", "replace").strip()


def parser(prog: str = "manage.py lab_console") -> argparse.ArgumentParser:
    """The command line: ``SOCKET {unlink,relink,retrain,raw} ARG...``."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Pull (unlink) or put back (relink) a cable of a running lab, or run an ibsim console command "
            "(raw), through the console socket the demo and fabric_lab print. Example: "
            "manage.py lab_console /tmp/weft-demo-lab-XXXX/console.sock unlink rail0-leaf-01 5"
        ),
    )
    p.add_argument("socket", help="the lab's console socket (printed by the demo / fabric_lab)")
    p.add_argument("verb", choices=VERBS)
    p.add_argument(
        "words", nargs="+", metavar="ARG", help="NODE [PORT] (node id, description or GUID), or COMMAND"
    )
    return p


def main(argv: list[str]) -> int:
    """Run the command line ``argv`` (without the program and verb names): print the lab's answer
    and return 0, or print the reason to stderr and return 1 (the lab refused, or is not there);
    argparse's usage error exits 2."""
    opts = parser().parse_args(argv)
    try:
        answer = request(opts.socket, request_line(opts.verb, opts.words))
    except OSError as exc:
        print(f"CommandError: no lab answers on {opts.socket}: {exc}", file=sys.stderr)
        return 1
    if answer.startswith("error:"):
        print(f"CommandError: {answer[len('error:') :].strip()}", file=sys.stderr)
        return 1
    print(answer)
    return 0
