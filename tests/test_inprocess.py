"""The embedded deployment's in-process worker (``weft.inprocess``): a task never overlaps itself;
a call arriving while the same call runs is run once more after it (however many arrived), a
beat tick finding it running is dropped."""

from __future__ import annotations

import threading

import pytest

from weft import inprocess
from weft.celery import app


@pytest.fixture
def worker():
    inprocess.start(workers=2, beat=False)
    yield
    inprocess.stop(wait=True)


@pytest.fixture
def gated_task():
    """A task that records each run and waits on a gate (so a test can call it while it runs)."""
    runs: list[int] = []
    gate = threading.Event()
    started = threading.Semaphore(0)

    @app.task(name="tests.inprocess.gated", bind=False)
    def gated(n):
        runs.append(n)
        started.release()
        gate.wait(10)

    yield gated, runs, gate, started
    gate.set()
    app.tasks.pop("tests.inprocess.gated", None)


def test_calls_during_a_run_coalesce_into_one_more_run(worker, gated_task):
    task, runs, gate, started = gated_task
    first = inprocess.submit(task, (1,), {})
    assert started.acquire(timeout=10)  # the first run holds the gate
    assert inprocess.submit(task, (1,), {}) is None  # queued once...
    assert inprocess.submit(task, (1,), {}) is None  # ...however many arrive
    assert inprocess.submit(task, (1,), {}, coalesce=False) is None  # a beat tick: dropped
    gate.set()
    first.result(timeout=10)
    assert started.acquire(timeout=10)  # the one more run
    assert not started.acquire(timeout=0.5)  # and no third
    assert runs == [1, 1]
    # once it ended, a new call runs at once (the key was released)
    inprocess.submit(task, (1,), {}).result(timeout=10)
    assert runs == [1, 1, 1]


def test_a_tick_alone_during_a_run_is_dropped(worker, gated_task):
    task, runs, gate, started = gated_task
    first = inprocess.submit(task, (2,), {})
    assert started.acquire(timeout=10)
    assert inprocess.submit(task, (2,), {}, coalesce=False) is None
    gate.set()
    first.result(timeout=10)
    assert not started.acquire(timeout=0.5)
    assert runs == [2]
