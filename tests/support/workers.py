"""Real ``celery -A weft worker`` processes for process tests (PostgreSQL + Redis from the test's
environment): each in its own session, killed with its pool at teardown."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from django.db import connection

from tests.support.waits import wait_for

ROOT = Path(__file__).resolve().parents[2]


class CeleryWorker:
    """``celery -A weft worker -Q <queues> -n <name>@%h -c <concurrency>`` on the test database,
    logging to ``log``; ``env`` adds or overrides environment variables. Started and ready (its
    log says so) when the constructor returns.

    Raises:
        AssertionError: the worker did not say ``ready`` within 90 s (its log's tail in the message).
    """

    def __init__(self, log: Path, queues: str, name: str, *, concurrency: int = 1, **env: str) -> None:
        db = connection.settings_dict
        url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        self.log, self.queues, self.name = log, queues, name
        full = {
            k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "WEFT_CELERY_EAGER")
        }
        full.update(DATABASE_URL=url, WEFT_PRODUCTION="0", PYTHONUNBUFFERED="1", **env)
        argv = [sys.executable, "-m", "celery", "-A", "weft", "worker", "-l", "info", "-c", str(concurrency)]
        argv += [
            "-Q",
            queues,
            "-n",
            f"{name}@%h",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ]
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=full, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )
        wait_for(lambda: " ready." in self.text() or self.proc.poll() is not None, 90, f"worker {name} ready")
        assert self.proc.poll() is None, self.text()[-3000:]

    @property
    def nodename(self) -> str:
        """``<name>@<host>``, as Celery names it (and ``core.procs.worker_name`` records it)."""
        import socket

        return f"{self.name}@{socket.gethostname()}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM the worker (a warm shutdown, as a supervisor stops it); returns its exit status."""
        os.killpg(self.proc.pid, signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes (its session), as a dead host would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        if not self._out.closed:
            self._out.close()
