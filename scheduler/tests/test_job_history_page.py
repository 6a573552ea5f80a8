"""The job page after a requeue and after a replacement (issue 26 §4, the walkthrough's job-page
defects): its timeline has a step for every state change in order (the requeue, the second
placement, the replacement: it showed the first placement's time with the replacement's reason
and no requeue), "GPUs bound" shows the allocation it holds now and lists the ones it held before
as past (a requeued job said "never placed"), and its size does not grow with its age (the
fabric view's series are fetched on demand, not inlined)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.html import escape

from pools.models import Allocation
from scheduler.choices import JobState
from scheduler.models import Job
from scheduler.services import faults
from scheduler.services.fabric_view import MAX_STEPS
from scheduler.services.queue import JobSpec, run_pass, start, submit
from tests.support.jobs import gpu_cluster, link_down


@pytest.fixture
def cluster(db):
    return gpu_cluster(2, 2, 8, name="hist")  # host001-002 on leaf-01, host003-004 on leaf-02


def _running(cluster, **kw) -> Job:
    job = submit(JobSpec(name="train", pool_id=cluster.pool.pk, count=8, gpus_per_host=8, **kw))
    run_pass()
    start(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    return job


def _steps(html: str) -> list[tuple[str, str]]:
    """(step code, its text) of the page's timeline, top to bottom."""
    tl = re.search(r'<ol class="timeline" id="job-timeline">(.*?)</ol>', html, re.S).group(1)
    return re.findall(r'<li data-step="(\w+)">(.*?)</li>', tl, re.S)


def _gpus(html: str) -> str:
    return re.search(r'<div class="card" id="job-allocations">(.*?)</div>', html, re.S).group(1)


def test_a_requeued_job_shows_the_requeue_and_its_past_allocation(cluster, client_for):
    cluster.pool.on_fault = "requeue"
    cluster.pool.save(update_fields=["on_fault"])
    job = _running(cluster)
    first_alloc, (host,) = job.allocation_id, job.placement
    link_down(cluster, host)
    assert faults.evaluate()["requeued"] == 1
    admin = client_for("admin")

    html = admin.get(f"/scheduler/jobs/{job.pk}/").content.decode()
    steps = _steps(html)
    assert [c for c, _ in steps] == ["submitted", "placed", "running", "degraded", "requeued"], steps
    assert "fabric fault" in steps[-1][1]
    gpus = _gpus(html)
    assert "never placed" not in gpus and "None now" in gpus and 'data-allocation=""' in gpus
    past = re.findall(r'<li data-allocation="(\d+)" data-state="(\w+)">(.*?)</li>', gpus, re.S)
    assert [(int(a), s) for a, s, _ in past] == [(first_alloc, "released")]
    assert f'data-host="{host}"' in past[0][2] and "GPU0, GPU1" in past[0][2]

    # placed again (not on the failed host): the current allocation, the first one past
    run_pass()
    job.refresh_from_db()
    assert job.state == JobState.PLACED and host not in job.placement
    html = admin.get(f"/scheduler/jobs/{job.pk}/").content.decode()
    steps = _steps(html)
    assert [c for c, _ in steps] == ["submitted", "placed", "running", "degraded", "requeued", "placed"], (
        steps
    )
    gpus = _gpus(html)
    (now_host,) = job.placement
    assert f'<table id="job-gpus" data-allocation="{job.allocation_id}">' in gpus
    current = gpus.split("</table>")[0]
    assert f'data-host="{now_host}"' in current and f'data-host="{host}"' not in current
    past = re.findall(r'<li data-allocation="(\d+)" data-state="(\w+)">', gpus)
    assert past == [(str(first_alloc), "released")]


def test_a_replaced_job_shows_the_replacement_and_the_hosts_it_left(cluster, client_for):
    job = _running(cluster, on_fault="replace")
    first_alloc, (host,) = job.allocation_id, job.placement
    placed_at = job.placed_at
    link_down(cluster, host)
    assert faults.evaluate()["replace_wanted"] == 1
    job.refresh_from_db()
    (mate,) = job.placement
    assert job.state == JobState.PLACED and mate != host and job.placed_at == placed_at
    html = client_for("admin").get(f"/scheduler/jobs/{job.pk}/").content.decode()
    steps = _steps(html)
    assert [c for c, _ in steps] == ["submitted", "placed", "running", "degraded", "moved"], steps
    # the first placement keeps its own explanation; the replacement says what it replaced
    assert "replaced" not in steps[1][1] and f"replaced {host}" in steps[-1][1]
    gpus = _gpus(html)
    current = gpus.split("</table>")[0]
    assert f'data-allocation="{job.allocation_id}"' in current and job.allocation_id != first_alloc
    assert f'data-host="{mate}"' in current and f'data-host="{host}"' not in current
    past = re.findall(r'<li data-allocation="(\d+)" data-state="(\w+)">(.*?)</li>', gpus, re.S)
    assert [(int(a), s) for a, s, _ in past] == [(first_alloc, "released")]
    assert f'data-host="{host}"' in past[0][2]
    assert Allocation.objects.get(pk=first_alloc).ended_at is not None


def test_timeline_steps_the_history_cap_trimmed_come_from_the_jobs_fields(cluster, client_for, settings):
    """The per-job history is capped: the job's own times still give its steps."""
    settings.WEFT_SCHEDULER_DECISION_HISTORY = 1
    job = _running(cluster)
    assert job.decisions.count() == 1  # only "running" kept
    steps = _steps(client_for("admin").get(f"/scheduler/jobs/{job.pk}/").content.decode())
    assert [c for c, _ in steps] == ["submitted", "placed", "running"]
    assert escape(job.decision["reasons"][0]) in steps[1][1]


def test_job_page_size_and_queries_do_not_grow_with_its_age(cluster, client_for):
    """The page inlines no counter history and no alarm list: a job running for two days with a
    day of per-minute history and a hundred alarms has a page as big as a new one's."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from events.models import Alarm
    from telemetry.models import CounterChunk, Resolution
    from telemetry.services.history import build_chunks

    young = _running(cluster)
    # old: placed two days ago on another host, a day of per-minute history on its ports
    ago = timezone.now() - timedelta(days=2)
    job = submit(JobSpec(name="train", pool_id=cluster.pool.pk, count=8, gpus_per_host=8), now=ago)
    run_pass(now=ago + timedelta(seconds=5))
    start(job.pk, now=ago + timedelta(seconds=10))
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.placed_at < ago + timedelta(seconds=6)
    admin = client_for("admin")
    admin.get(f"/scheduler/jobs/{young.pk}/")  # warm the locality tree
    with CaptureQueriesContext(connection) as young_q:
        young_html = admin.get(f"/scheduler/jobs/{young.pk}/").content
    ports = list(
        cluster.fabric.nodes.get(host__name=next(iter(job.placement))).ports.values_list("pk", flat=True)
    )
    end = int(timezone.now().timestamp())
    CounterChunk.objects.bulk_create(
        [
            row
            for t in range(end - 86400, end, 60)
            for row in build_chunks(cluster.fabric.pk, t - t % 60, [(p, (1e9, 2e9, 10.0, 0, 0)) for p in ports], Resolution.MINUTE)
        ]
    )  # fmt: skip
    node = cluster.fabric.nodes.get(host__name=next(iter(job.placement)))
    Alarm.objects.bulk_create(
        [
            Alarm(fabric=cluster.fabric, code="port.symbol_errors", severity="minor", object_type="node",
                  object_key=node.node_guid, object_repr=str(node), node=node, message="symbol errors " * 5,
                  first_seen=ago + timedelta(minutes=k), last_seen=ago + timedelta(minutes=k),
                  state="cleared", cleared_at=ago + timedelta(minutes=k + 1))
            for k in range(100)
        ]
    )  # fmt: skip
    with CaptureQueriesContext(connection) as old_q:
        old = admin.get(f"/scheduler/jobs/{job.pk}/").content
    assert abs(len(old) - len(young_html)) <= 16, (len(young_html), len(old))  # host names, ids differ
    assert len(old_q) == len(young_q)
    # the data is there, on demand
    data = admin.get(f"/api/scheduler/jobs/{job.pk}/fabric/?series=totals").json()
    assert len(data["alarms"]) == 100
    # at most MAX_STEPS steps whatever its age: a day of per-minute rows and no per-hour rollup
    # are more, so they come in bins (scheduler.services.fabric_view, "Time steps"); every row
    # with ?resolution=minute
    got = data["resolution"]
    assert (got["read"], got["downsampled"], got["max_steps"]) == ("minute", True, MAX_STEPS)
    samples = data["totals"]["hca"]["summary"]["samples"]
    assert got["step_s"] % 60 == 0 and 86400 // got["step_s"] - 1 <= samples <= MAX_STEPS
    whole = admin.get(f"/api/scheduler/jobs/{job.pk}/fabric/?series=totals&resolution=minute").json()
    assert whole["totals"]["hca"]["summary"]["samples"] >= 1400 and whole["resolution"]["step_s"] == 60
