"""The dry run (``scheduler.services.whatif.dry_run``): the next pass planned with the asked job
added — placement, preemption victims, quota — and nothing written."""

from __future__ import annotations

import pytest

from pools.models import Allocation
from scheduler.models import Job, JobDecision
from scheduler.services.queue import InvalidJob, JobSpec, run_pass, submit
from scheduler.services.whatif import dry_run
from tests.support.jobs import gpu_cluster


def _state():
    return (
        list(Job.objects.order_by("pk").values_list("pk", "state", "placement")),
        JobDecision.objects.count(),
        list(Allocation.objects.order_by("pk").values_list("pk", "state")),
    )


def test_dry_run_names_the_victims_it_would_preempt_and_writes_nothing(db):
    c = gpu_cluster(2, 2, 8, name="wi")  # 4 hosts, 32 GPUs
    fills = [
        submit(JobSpec(name=f"fill{i}", pool_id=c.pool.pk, count=8, gpus_per_host=8, priority_class="batch",
                       preemptible=True))
        for i in range(4)
    ]  # fmt: skip
    run_pass()
    assert {j.state for j in Job.objects.filter(pk__in=[f.pk for f in fills])} == {"placed"}
    before = _state()
    out = dry_run(JobSpec(name="urgent", pool_id=c.pool.pk, count=16, gpus_per_host=8, priority_class="high",
                          tier="leaf", tier_mode="required"))  # fmt: skip
    o = out["outcome"]
    assert (o["code"], o["hosts"], o["tier_name"], o["units"], o["lower_bound"]) == (
        "placed",
        2,
        "leaf",
        1,
        1,
    )
    assert len(o["victims"]) == 2 and set(o["victims"]) <= {f.pk for f in fills}
    victims_hosts = {h for j in Job.objects.filter(pk__in=o["victims"]) for h in j.placement}
    assert set(o["placed"]) == victims_hosts and sum(o["placed"].values()) == 16
    assert out["request"] == "16 GPUs (2 hosts × 8), within one leaf (required)"
    assert out["pending_ahead"] == 0 and out["without_quota"] is None
    assert _state() == before
    # the same job at batch priority preempts nothing: capacity, with a reservation
    o = dry_run(JobSpec(name="late", pool_id=c.pool.pk, count=16, gpus_per_host=8, priority_class="batch"))[
        "outcome"
    ]
    assert o["code"] == "capacity" and o["victims"] == [] and o["reservation"]["hosts"]
    with pytest.raises(InvalidJob) as exc:
        dry_run(JobSpec(name="bad", pool_id=c.pool.pk, count=8, tier="rack"))
    assert exc.value.field == "tier"
    with pytest.raises(InvalidJob, match="more than pool p-wi can ever hold: 32 GPUs") as exc:
        dry_run(JobSpec(name="huge", pool_id=c.pool.pk, count=33))  # as submit would refuse it
    assert exc.value.field == "count"
    assert _state() == before


def test_the_outcome_names_congested_and_avoided_units_as_admins_know_them():
    """The plan keeps unit keys (``f1/leaf/0x…``); the dry run's page and JSON show their names."""
    from types import SimpleNamespace

    from scheduler.locality import Domain, Locality
    from scheduler.services.whatif import _outcome_dict

    loc = Locality(
        domains={
            "f1/leaf/0x0c42": Domain(key="f1/leaf/0x0c42", tier=1, name="leaf-07", fabric_id=1, parent=None)
        }
    )
    out = SimpleNamespace(
        code="placed", position=1, reasons=[], placed={"h1": 8}, victims=[], backfilled=False,
        reservation=None, decision={"congested": ["f1/leaf/0x0c42"], "avoided": ["f1/leaf/0xgone"]},
    )  # fmt: skip
    d = _outcome_dict(out, loc)
    assert (d["congested"], d["avoided"], d["hosts"]) == (["leaf-07"], ["f1/leaf/0xgone"], 1)


def test_the_outcome_shows_the_hot_ports_its_routes_avoided_in_percent():
    """Path-aware placement's ports reach the dry run's JSON and page (``scheduler/_outcome.html``)."""
    from types import SimpleNamespace

    from django.template.loader import render_to_string

    from scheduler.locality import Locality
    from scheduler.placement import HotPort
    from scheduler.services.whatif import _outcome_dict

    hot = HotPort("0x0c42a10300a00000/2", "spine-01 [2]", 0.354, 0.9).as_dict()
    out = SimpleNamespace(
        code="placed", position=1, reasons=[], placed={"h1": 8, "h2": 8}, victims=[], backfilled=False,
        reservation=None, decision={"scoring": "paths", "hot_ports": [], "avoided_ports": [hot]},
    )  # fmt: skip
    d = _outcome_dict(out, Locality())
    assert (d["scoring"], d["hot_ports"], d["avoided_ports"]) == ("paths", [], [hot])
    html = render_to_string("scheduler/_outcome.html", {"o": d})
    assert "Hot ports avoided (routes): spine-01 [2] utilisation 35% congestion 90%" in html
    assert "Hot ports its routes may cross" not in html and "routes are not read yet" not in html
    leaf = render_to_string("scheduler/_outcome.html", {"o": d | {"scoring": "leaf", "avoided_ports": []}})
    assert "Congestion scored per leaf and spine block: this fabric's routes are not read yet." in leaf
