"""A lab process killed under the demo's threads (``kill -9`` of ibsim or OpenSM by a tester).

ibsim gone: the traffic player and the fault injector each log one line naming the dead ibsim
and stop (they used to log a console error per PerformanceSet, ~90 lines a second, and a
traceback per injection). OpenSM gone (a zombie until the lab reaps it): applying the partitions
reports OpenSM not running, instead of a SIGHUP "sent" to the zombie."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest

from lab.pytest_plugin import small_netfile
from tests.support.waits import wait_for

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]


def test_killed_ibsim_stops_traffic_and_faults_with_one_line_each(lab_factory, caplog):
    from fabric.models import Fabric
    from fabric.services.discovery import discover
    from lab.faults import FaultInjector
    from lab.traffic import TrafficPlayer

    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(name="death", tool_env=dict(lab.tool_env))
    discover(fabric)
    player = TrafficPlayer(lab, fabric, interval=0.1, seed=1)
    injector = FaultInjector(lab, 0.3, kinds=("flap",), flap_s=0.2, seed=3)
    with caplog.at_level(logging.INFO, logger="lab"):
        player.start()
        injector.start()
        try:
            wait_for(lambda: player.ticks >= 3 and len(injector.history) >= 2, 30, "traffic and flaps")
            assert player.errors == 0
            ibsim = lab.pids[-1]  # OpenSMs, then ibsim
            ticks, t0 = player.ticks, time.monotonic()
            os.kill(ibsim, signal.SIGKILL)
            wait_for(lambda: not player.is_alive() and not injector.is_alive(), 30, "both threads stopped")
            print(
                f"ibsim killed: both stopped within {time.monotonic() - t0:.2f} s, {player.ticks - ticks} tick(s) later"
            )
        finally:
            player.stop()
            injector.stop()
    gone = f"the lab's ibsim (pid {ibsim}) has exited (killed by signal 9)"
    assert player.stopped_because == injector.stopped_because == gone
    traffic = [r for r in caplog.records if r.name == "lab.traffic" and r.levelno >= logging.WARNING]
    faults = [r for r in caplog.records if r.name == "lab.faults" and r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in traffic] == [f"traffic player stopped: {gone}"]
    assert [r.getMessage() for r in faults] == [f"fault injector stopped: {gone}"]
    assert not any(r.exc_info for r in caplog.records), "no traceback for a dead ibsim"
    assert lab.failure() == gone


def test_killed_opensm_is_reported_not_running_by_the_apply(lab_factory):
    from core import procs
    from events.models import Event
    from fabric.choices import ApplyState
    from fabric.models import Fabric, Partition
    from fabric.services.partitions import ApplyError, apply, save_partition, signal_opensm

    lab = lab_factory(small_netfile())
    fabric = Fabric.objects.create(
        name="smdeath",
        tool_env=dict(lab.tool_env),
        partitions_path=str(lab.partitions_path),
        sm_pid_file=str(lab.sm_pid_file),
    )
    pid = int(lab.sm_pid_file.read_text())
    assert procs.is_running(pid) and signal_opensm(fabric) == f"SIGHUP to pid {pid}"
    os.kill(pid, signal.SIGKILL)
    # the lab has not waited for it: a zombie, which os.kill would "signal" without an error
    wait_for(lambda: procs.state(pid) == "Z", 10, "OpenSM a zombie")
    with pytest.raises(
        ApplyError, match=rf"OpenSM pid {pid} .* not sent: OpenSM is not running \(has exited"
    ):
        signal_opensm(fabric)
    save_partition(Partition(fabric=fabric, name="p", pkey=0x10))
    result = apply(fabric, timeout=5)
    assert not result.ok and result.signalled == ""
    assert "OpenSM is not running" in result.error
    assert Partition.objects.get(fabric=fabric, pkey=0x10).applied_state == ApplyState.FAILED
    assert Event.objects.filter(fabric=fabric, code="partition.apply_failed").count() == 1
    # reaped (the lab's own check polls it): gone, still not running
    assert lab.sm_pids == []
    with pytest.raises(ApplyError, match=r"not sent: OpenSM is not running \(no such process\)"):
        signal_opensm(fabric)
