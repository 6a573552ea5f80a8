"""Plumbing every bench shares: a scratch database, the load average, cleanup on SIGTERM, medians.

A bench (``bench/<name>.py``, run as a script: this folder is on ``sys.path``) does::

    kit = benchkit.Bench("sweep")             # load average at start; SIGTERM/SIGINT -> SystemExit
    with kit.scratch_database(pg_url):         # before django.setup(): DATABASE_URL / WEFT_DATA_DIR
        benchkit.django_setup()                # django.setup() + migrate on the scratch database
        lab = kit.stops(Lab(...).start())      # stopped when the bench ends, a SIGTERM included
        ...
    print(json.dumps(kit.finish(out)))         # adds "load" (start/end) and "quiet"

* :meth:`Bench.scratch_database`: every run starts from a fresh database holding only what
  ``migrate`` writes and drops it at the end: on PostgreSQL a ``weft_bench_<hex>`` database
  created on the server of ``pg_url`` (dropped ``WITH (FORCE)``); without one, SQLite in a
  temporary ``WEFT_DATA_DIR`` (removed). Both are copies of the migrated template
  (``tests.support.migrated``: ``migrate`` runs once per set of migrations, not once per bench),
  so :func:`django_setup`'s ``migrate`` finds nothing to apply. A ``DATABASE_URL``/``WEFT_DATA_DIR``
  of the caller is never written to.
* SIGTERM (and SIGINT) raise ``SystemExit`` in the main thread, so ``finally`` blocks and the
  cleanups registered with :meth:`Bench.stops`/:meth:`Bench.on_exit` run: labs (ibsim, OpenSM),
  snmpsim agents and servers a bench started are stopped, its scratch database dropped.
* :func:`load_average` is ``os.getloadavg()``; :meth:`Bench.finish` records it at start and end
  and the peak seen during the run (:class:`LoadWatch`, sampled every 2 s), and marks the figures
  ``"quiet": false`` when the 1-minute load at start is above :data:`QUIET_LOAD` or its peak
  during the run above :data:`QUIET_PEAK` (other work started meanwhile: the ratios swing with
  load, see issue 27; a start-only check let a run that other work joined pass as quiet).
* :func:`median_spread`, :func:`sides`: medians with their [min, max] spread, and a ratio printed
  with both sides' absolute seconds.

Not a test helper: nothing here asserts a figure.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.migrated import create_pg_database, seed_sqlite  # noqa: E402

#: 1-minute load average at start above which a bench's figures are marked ``"quiet": false``
QUIET_LOAD = 0.5
#: peak 1-minute load during a run above which its figures are not quiet: the bench's own
#: processes (itself, a lab's ibsim + OpenSM, a server, PostgreSQL) make up to about 3 on two cores
QUIET_PEAK = 3.0
#: the PostgreSQL server of the benches that need one (``WEFT_BENCH_PG``), without a database name
DEFAULT_PG = os.environ.get("WEFT_BENCH_PG", "postgresql://postgres@127.0.0.1:5432")


#: a small real fabric (15 nodes) for the ``--tiny`` runs of the benches that import a topology
TINY_TOPOLOGY = "ibnetdiscover/ufm_small_topo_file.ibnetdiscover.txt"


def realdata() -> Path:
    """The folder of public real-fabric outputs (``$WEFT_REALDATA``, default ``../shared/realdata``)."""
    return Path(os.environ.get("WEFT_REALDATA", ROOT.parent / "shared" / "realdata"))


def pg_server_from_env() -> str | None:
    """The server part of ``DATABASE_URL`` when it names PostgreSQL (a bench then makes its scratch
    database there, never writing to the one named), else ``None`` (SQLite)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        return None
    scheme, rest = url.split("://", 1)
    return f"{scheme}://{rest.split('/', 1)[0]}"


def load_average() -> dict[str, float]:
    """``{"1m", "5m", "15m"}``: the run-queue load averages (``os.getloadavg``, /proc/loadavg)."""
    one, five, fifteen = os.getloadavg()
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2)}


def median_spread(values: Iterable[float], digits: int = 4) -> tuple[float | None, list[float]]:
    """(median, [min, max]) of ``values`` rounded to ``digits``; ``(None, [])`` when empty."""
    vals = list(values)
    if not vals:
        return None, []
    return round(statistics.median(vals), digits), [round(min(vals), digits), round(max(vals), digits)]


def sides(name: str, weft_s: float, baseline: str, baseline_s: float, digits: int = 4) -> dict:
    """A ratio with each side's absolute seconds beside it: ``{"<name>_s", "<baseline>_s",
    "ratio"}`` (``ratio`` = weft / baseline seconds; ``None`` when the baseline took 0 s)."""
    return {
        f"{name}_s": round(weft_s, digits),
        f"{baseline}_s": round(baseline_s, digits),
        "ratio": round(weft_s / baseline_s, 3) if baseline_s else None,
    }


def django_setup(migrate: bool = True) -> None:
    """``django.setup()`` with the project's settings, then ``migrate`` (quiet) when asked: call it
    inside :meth:`Bench.scratch_database`, which has pointed the settings at the scratch database."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "weft.settings")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


class LoadWatch:
    """The peak 1-minute load average while a bench runs: a daemon thread reads
    ``os.getloadavg()`` every ``every_s`` seconds from construction on. ``peak`` (a float) is
    the highest value seen so far (the value at construction included)."""

    def __init__(self, every_s: float = 2.0) -> None:
        import threading

        self.start = load_average()
        self.peak = self.start["1m"]
        self._stop = threading.Event()
        self._every = every_s
        threading.Thread(target=self._run, name="bench-loadwatch", daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.peak = max(self.peak, os.getloadavg()[0])

    def verdict(self) -> dict:
        """``{"load": {"start", "end", "peak"}, "quiet": bool}`` (see the module docstring)."""
        end = load_average()
        self.peak = round(max(self.peak, end["1m"]), 2)
        return {
            "load": {"start": self.start, "end": end, "peak": self.peak},
            "quiet": self.start["1m"] <= QUIET_LOAD and self.peak <= QUIET_PEAK,
        }


class Bench:
    """One bench run: load at start, cleanups on exit (SIGTERM included), the scratch database."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.watch = LoadWatch()
        self.load_start = self.watch.start
        self._cleanups: list[Callable[[], None]] = []
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame) -> None:
        signal.signal(signum, signal.SIG_IGN)  # a second one does not interrupt the cleanup
        raise SystemExit(128 + signum)

    def on_exit(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Run ``fn()`` when the bench ends (normally, on an error or on SIGTERM/SIGINT; last
        registered first). Returns ``fn``."""
        self._cleanups.append(fn)
        return fn

    def stops(self, thing):
        """Register ``thing.stop()`` with :meth:`on_exit` (a lab, snmpsim agents, a server); returns ``thing``."""
        self.on_exit(thing.stop)
        return thing

    def cleanup(self) -> None:
        """Run the registered cleanups now, each once; an error in one does not skip the others."""
        while self._cleanups:
            fn = self._cleanups.pop()
            try:
                fn()
            except Exception as exc:  # report and go on: the next cleanup stops another process
                print(
                    f"{self.name}: cleanup {getattr(fn, '__qualname__', fn)} failed: {exc}", file=sys.stderr
                )

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc) -> None:
        self.cleanup()

    @contextlib.contextmanager
    def scratch_database(self, pg_url: str | None = None) -> Iterator[str]:
        """A fresh database for this run, a copy of the migrated template (see the module docstring); yields its URL or
        SQLite path. Sets ``DATABASE_URL``/``WEFT_DATA_DIR`` (call it before Django is set up);
        dropped on exit (SIGTERM included), the caller's environment restored."""
        saved = {k: os.environ.get(k) for k in ("DATABASE_URL", "WEFT_DATA_DIR", "WEFT_SQLITE_PATH")}
        data_dir = tempfile.mkdtemp(prefix=f"weft-bench-{self.name}-")
        os.environ["WEFT_DATA_DIR"] = data_dir
        os.environ.pop("WEFT_SQLITE_PATH", None)
        drop: Callable[[], None] = lambda: None  # noqa: E731
        if pg_url:
            import psycopg

            server = pg_url.rstrip("/")
            name = f"weft_bench_{self.name.replace('-', '_')}_{uuid.uuid4().hex[:8]}"
            create_pg_database(server, name)

            def drop() -> None:
                if "django" in sys.modules:
                    from django.db import connections

                    connections.close_all()
                with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

            os.environ["DATABASE_URL"] = url = f"{server}/{name}"
        else:
            os.environ.pop("DATABASE_URL", None)
            url = str(seed_sqlite(Path(data_dir) / "weft.sqlite3"))

        def remove() -> None:
            drop()
            shutil.rmtree(data_dir, ignore_errors=True)
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

        self.on_exit(remove)
        try:
            yield url
        finally:
            self.cleanup()

    def finish(self, out: dict) -> dict:
        """``out`` with ``load`` (``start``/``end``: :func:`load_average`, ``peak``) and ``quiet``
        (:meth:`LoadWatch.verdict`) added; runs the cleanups first."""
        self.cleanup()
        out.update(self.watch.verdict())
        return out
