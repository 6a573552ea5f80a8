"""Generic tests of every REST viewset, after NetBox's ``APIViewTestCases``, as pytest parametrisation.

The routes come from walking the URLconf (``tests.support.api.viewset_routes``): a viewset registered
in any app's router is tested here without being listed. For each route:

* the permission matrix, with exact status codes: anonymous 401, a role below the one the route
  needs 403 (and nothing stored), the others 200/201/202/204 with a body that says what happened;
  the least role per route is the house default of ``RolePermission`` (reads Viewer, writes Admin)
  unless :data:`LEAST_ROLE` names another;
* lists: count and page agree with the database; ``?brief=1`` gives the brief form where a viewset
  has one; every exact model-field filter returns what the same filter on the database returns;
* detail: the object asked for;
* writes: one audit entry per write, and when the audit entry cannot be written the write is not
  stored either and nothing is queued on commit.

Writes need a payload: a new write route fails :func:`test_every_route_has_a_case` until
:data:`WRITES` describes it; a new GET action likewise needs a :data:`READ_CHECKS` entry.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.urls import reverse
from django.utils import timezone
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.settings import api_settings
from rest_framework.test import APIClient

from accounts import audit
from accounts.models import ApiToken, AuditEntry
from accounts.permissions import RolePermission
from accounts.roles import set_role
from accounts.tokens import check_key, create_token
from core.api.views import BriefModeMixin
from devices.models import Device, Interface, Neighbour, Sensor
from events.models import Alarm, AlertTarget, Event, EventPolicy, HealthReport
from fabric.choices import SMState
from fabric.models import (
    Fabric,
    Host,
    Link,
    Node,
    Partition,
    PartitionApply,
    PartitionMember,
    Port,
    SubnetManager,
)
from fabric.parsers.cablerecord import CableReading
from fabric.services.cables import record_readings
from fabric.services.ingest import import_topology_text
from fabric.services.requests import set_node_name_map
from pools.models import Allocation, Pool, Tenant, TenantMembership
from pools.parsers.records import GpuRecord, GpuReport, MigDeviceRecord
from pools.services.allocation import AllocationRequest, allocate, release
from pools.services.inventory import ingest_gpu_report
from scheduler.models import Job
from scheduler.services.queue import JobSpec, run_pass, submit
from tests.support.api import Route, viewset_routes
from tests.support.module_rows import module_rows
from tests.support.topologies import BASE
from tests.support.users import create_role_users

ROUTES = viewset_routes()
ROLES = ("anonymous", "viewer", "operator", "admin")
RANK = {role: n for n, role in enumerate(ROLES)}

#: Routes whose least role differs from the house default (reads Viewer, writes Admin).
LEAST_ROLE = {
    "fabric-api:fabric-discover POST": "operator",
    "fabric-api:port-port-action POST": "operator",
    "events-api:alarm-acknowledge POST": "operator",
    "events-api:alarm-clear POST": "operator",
    "events-api:healthreport-run POST": "operator",
    "events-api:eventpolicy-list GET": "admin",
    "events-api:eventpolicy-detail GET": "admin",
    "events-api:alerttarget-list GET": "admin",
    "events-api:alerttarget-detail GET": "admin",
    "events-api:alerttarget-deliveries GET": "admin",
    "accounts-api:user-list GET": "admin",
    "accounts-api:user-detail GET": "admin",
    "accounts-api:user-token POST": "viewer",
    "accounts-api:auditentry-list GET": "admin",
    "accounts-api:auditentry-detail GET": "admin",
    "pools-api:allocation-allocate POST": "operator",
    "pools-api:allocation-release POST": "operator",
    "pools-api:agenttoken-list GET": "admin",
    "pools-api:agenttoken-detail GET": "admin",
    "scheduler-api:job-list POST": "operator",
    "scheduler-api:job-cancel POST": "operator",
    "scheduler-api:job-start POST": "operator",
    "scheduler-api:job-finish POST": "operator",
    "scheduler-api:job-replace POST": "operator",
}

ANONYMOUS_DETAIL = "Authentication credentials were not provided."

#: Apps whose rows a refused or failed write must leave as they were.
STORED_APPS = {"fabric", "events", "telemetry", "accounts", "auth", "pools", "scheduler", "devices"}


def least_role(route: Route) -> str:
    return LEAST_ROLE.get(route.id, "viewer" if route.safe else "admin")


# --- the data every route is tried on ----------------------------------------------------------


@dataclass
class World:
    """Two imported fabrics (``f``, ``f2``) and at least two rows of every model an API lists."""

    users: dict
    fabric: Fabric
    other: Fabric
    alarm: Alarm
    policy: EventPolicy
    target: Any  # a user to edit and delete
    partition: Any = None  # a non-default partition of ``fabric``
    tenant: Any = None  # a tenant with a pool and an active allocation (t-a)
    other_tenant: Any = None  # a tenant holding nothing, to edit and delete (t-b)
    pool: Any = None  # t-a's pool
    shared_pool: Any = None  # a shared pool holding nothing, to edit and delete
    allocation: Any = None  # an active MIG-slice allocation in ``pool``
    placed_job: Any = None  # a job the queue placed (a MIG slice in ``pool``)
    pending_job: Any = None  # a job the queue could not place (whole GPUs: the world's are MIG)
    device: Any = None  # an SNMP device of ``fabric`` with an interface, a sensor, a neighbour
    alert_target: Any = None  # a webhook alert target (its URL answers nothing: port 9 refuses)


def _alert_targets():
    """Two alert targets of different kinds, one disabled (the list filters need both); returns the
    webhook (its URL answers nothing: port 9 refuses)."""
    AlertTarget.objects.create(name="syslog", kind="syslog", url="udp://127.0.0.1:9", enabled=False)
    return AlertTarget.objects.create(
        name="on-call", kind="webhook", url="http://127.0.0.1:9/hook", secret="s3cret"
    )


def build_world(users: dict) -> World:
    """The rows every route is tried on, made through the services that make them in use."""
    for role in ("viewer", "operator"):  # two users' API tokens (the Admin lists both)
        create_token(users[role], f"{role}'s script", actor=users[role])
    fabric = import_topology_text("f", BASE, filename="base.topo").fabric
    other = import_topology_text(
        "f2", BASE.replace("lid 11 lmc 0", "lid 21 lmc 0"), filename="f2.topo"
    ).fabric
    SubnetManager.objects.create(
        fabric=fabric, guid="0x0002c90300a1b2c3", lid=1, priority=15, state=SMState.MASTER
    )
    SubnetManager.objects.create(fabric=other, guid="0x0002c90300a1b2c4", lid=2, state=SMState.STANDBY)
    now = timezone.now()
    node = Node.objects.filter(fabric=fabric).order_by("pk").first()
    raised = Event.objects.create(
        fabric=fabric, at=now, code="link.down", severity="critical", category="topology",
        object_type="link", object_key="k1", object_repr="spine-1 [1] <-> leaf-1 [7]", message="down",
    )  # fmt: skip
    Event.objects.create(
        fabric=other, at=now - timedelta(hours=1), code="node.added", severity="info", category="topology",
        object_type="node", object_key=node.node_guid, object_repr=str(node), node=node, message="added",
    )  # fmt: skip
    alarm = Alarm.objects.create(
        fabric=fabric, code="link.down", severity="critical", category="topology", state="active",
        object_type="link", object_key="k1", object_repr="spine-1 [1] <-> leaf-1 [7]", message="down",
        first_seen=now, last_seen=now, raised_event=raised,
    )  # fmt: skip
    Alarm.objects.create(
        fabric=other, code="port.symbol_errors", severity="minor", category="counters", state="cleared",
        object_type="port", object_key="k2", first_seen=now, last_seen=now, cleared_at=now,
    )  # fmt: skip
    policy, _ = EventPolicy.objects.update_or_create(
        code="link.down", defaults={"severity": "critical", "raise_alarm": True}
    )  # the ingest may have created the policies already
    EventPolicy.objects.update_or_create(code="node.added", defaults={"severity": "info", "enabled": False})
    HealthReport.objects.create(fabric=fabric, trigger="manual", status="critical", summary={"sm_state": 1})
    HealthReport.objects.create(fabric=other, trigger="scheduled", status="ok", summary={})
    User = get_user_model()
    target = User.objects.create_user("target", email="target@example.org", password="pw-target")
    set_role(target, "viewer")
    User.objects.create_user("gone", is_active=False)
    audit.record("fabric.create", fabric, user=users["admin"])
    audit.record("fabric.create", other, user=users["admin"])
    for f, n in ((fabric, 2), (other, 1)):  # GPU inventories: GPUs, MIG slices, host reports
        report = GpuReport(driver_version="550.54", attached_gpus=n)
        for i in range(n):
            report.gpus.append(GpuRecord(
                index=i, uuid=f"GPU-{f.name}-{i}", product_name="H100", memory_total_mib=81559, health="healthy",
                mig_current="enabled", rail_device="mlx5_0", rail_affinity="PIX",
                mig_devices=[MigDeviceRecord(1, 0, 0, "3g.40gb"), MigDeviceRecord(2, 0, 1, "3g.40gb")]))  # fmt: skip
        ingest_gpu_report(Host.objects.get(fabric=f, name="host001"), report, source="import")
    partition = Partition.objects.create(
        fabric=fabric, name="pool_a", pkey=0x0123, mtu=4
    )  # first: GET actions
    Partition.objects.create(fabric=fabric, name="Default", pkey=0x7FFF, ipoib=True, is_default=True)
    PartitionMember.objects.create(partition=partition, port_guid="0x0002c90300000010", membership="full")
    PartitionMember.objects.create(partition=partition, port_guid="0x0002c90300000011", membership="limited")
    PartitionApply.objects.create(fabric=fabric, state="done", ok=True, result={"applies": 1})
    PartitionApply.objects.create(
        fabric=other, state="failed", ok=False, result={"error": "no partitions file"}
    )
    # tenants (the viewer and the operator are members of both), a tenant pool and a shared one,
    # an active allocation and a released one (MIG slices: the world's GPUs are MIG-enabled)
    tenant = Tenant.objects.create(name="t-a", description="first")
    other_tenant = Tenant.objects.create(name="t-b")
    for t in (tenant, other_tenant):
        TenantMembership.objects.create(tenant=t, user=users["viewer"], role="viewer")
        TenantMembership.objects.create(tenant=t, user=users["operator"], role="operator")
    pool = Pool.objects.create(name="p-a", tenant=tenant, quota_slices=4, guaranteed_slices=1)
    shared = Pool.objects.create(name="p-shared", gpu_model="H100", quota_gpus=4, priority_weight=2)
    mig = AllocationRequest(kind="mig", count=1, mig_profile="3g.40gb")
    allocation = allocate(
        pool.pk, AllocationRequest(**vars(mig) | {"job": "slurm-1"}), user=users["operator"]
    )
    done = allocate(
        shared.pk, AllocationRequest(**vars(mig) | {"tenant_id": other_tenant.pk}), user=users["admin"]
    )
    release(done.pk, user=users["admin"])
    # jobs: one placed by a scheduling pass, one left pending by it (decisions for both)
    placed_job = submit(JobSpec(name="train", pool_id=pool.pk, kind="mig", count=1, mig_profile="3g.40gb",
                                preemptible=True), user=users["operator"])  # fmt: skip
    pending_job = submit(JobSpec(name="wait", pool_id=pool.pk, count=3), user=users["admin"])
    run_pass()
    placed_job.refresh_from_db()
    pending_job.refresh_from_db()
    assert (placed_job.state, pending_job.state) == ("placed", "pending")
    devices = []
    for f, n in ((fabric, 1), (other, 2)):  # SNMP devices, each with an interface, sensor, neighbour
        d = Device(fabric=f, name=f"sw{n}", address=f"192.0.2.{n}", status="ok", sys_name=f"sw{n}")
        d.set_secret("community", f"community-{n}")
        d.save()
        i = Interface.objects.create(
            device=d, if_index=n, name=f"swp{n}", admin_status="up", oper_status="up"
        )
        Sensor.objects.create(device=d, index=n, name=f"temp{n}", kind="temperature", sensor_type=8, value=40.0 + n,
                              status="ok")  # fmt: skip
        Neighbour.objects.create(device=d, interface=i, local_port=f"swp{n}", chassis_id=f"00:00:00:00:00:0{n}",
                                 port_id="swp9", sys_name="peer")  # fmt: skip
        devices.append(d)
    for f, source, serial in ((fabric, "mlxlink", "MT0000FT00001"), (other, "ibdiagnet", "MT0000FT00002")):
        port = (
            Port.objects.filter(node__fabric=f, port_num__gt=0).select_related("node").order_by("pk").first()
        )
        reading = CableReading(vendor="Mellanox", part_number="MFS1S00-H003V", serial_number=serial, length_m=3.0,
                               temperature_c=40.0, rx_power_dbm=[-1.0, -1.2])  # fmt: skip
        record_readings(f, [(port, reading)], source=source)  # the cables list (fabric.services.cables)
    return World(users=users, fabric=fabric, other=other, alarm=alarm, policy=policy, target=target,
                 partition=partition, tenant=tenant, other_tenant=other_tenant, pool=pool, shared_pool=shared,
                 allocation=allocation, placed_job=placed_job, pending_job=pending_job,
                 device=devices[0],
                 alert_target=_alert_targets())  # fmt: skip


@pytest.fixture(scope="module")
def _world_rows(django_db_setup, django_db_blocker) -> Iterator[World]:
    """The world and its users, built once per module (on each xdist worker that runs its tests)
    in a transaction rolled back at the module's end (``tests.support.module_rows``): building
    it takes ~2 s, and the module has some 300 tests."""
    yield from module_rows(django_db_blocker, lambda: build_world(create_role_users()))


@pytest.fixture
def world(_world_rows, db) -> World:
    """The module's world for one test: the rows as built (the test's writes are rolled back after
    it), the objects the test's own copies (a test may change one in memory)."""
    return copy.deepcopy(_world_rows)


@pytest.fixture
def users(world) -> dict:
    """The world's users (the root conftest's ``users``, built with the world)."""
    return world.users


@pytest.fixture
def clients(client_for) -> dict[str, APIClient]:
    return {"anonymous": APIClient(), **{role: client_for(role) for role in ROLES[1:]}}


@functools.cache
def _stored_queries(vendor: str) -> tuple[tuple[str, str, tuple], ...]:
    """``(model label, SQL, params)``: the query of every row of each model of the apps in
    :data:`STORED_APPS` (logins excepted), ordered by primary key, compiled once per database
    vendor: compiling the ~50 querysets took ten times longer than running them."""
    queries = []
    for model in apps.get_models(include_auto_created=True):
        if model._meta.app_label not in STORED_APPS:
            continue
        qs = model._default_manager.order_by("pk").values_list()
        if model is AuditEntry:
            qs = qs.exclude(action="user.login")
        queries.append((model._meta.label, *qs.query.sql_with_params()))
    return tuple(queries)


def stored() -> dict[str, list]:
    """Every row of the apps in :data:`STORED_APPS` (logins excepted), to compare before/after:
    the columns as the database holds them (before the fields' conversions to Python, so two
    reads are equal only when the stored values are)."""
    rows = {}
    with connection.cursor() as cursor:
        for label, sql, params in _stored_queries(connection.vendor):
            cursor.execute(sql, params)
            rows[label] = cursor.fetchall()
    return rows


def audit_ids() -> set[int]:
    return set(AuditEntry.objects.exclude(action="user.login").values_list("pk", flat=True))


# --- what each write sends and what it must have done --------------------------------------------


@dataclass(frozen=True)
class Write:
    """A write route's case: expected status, the object it acts on, the body, and a check of the
    response body and the database after it (returns True when the write did what it says)."""

    status: int
    check: Callable[[World, Any], bool]
    body: Callable[[World], Any] | dict | None = None
    target: Callable[[World], Any] | None = None
    prepare: Callable[[World], None] | None = None
    #: audit entries the write makes (another service's own audited write counts too)
    audits: int = 1

    def payload(self, world: World) -> Any:
        return self.body(world) if callable(self.body) else self.body


def _live(world: World) -> None:
    Fabric.objects.filter(pk=world.fabric.pk).update(tool_env={"LD_PRELOAD": "libumad2sim.so"})


def _user(username: str):
    return get_user_model().objects.filter(username=username).first()


WRITES: dict[str, Write] = {
    "fabric-api:fabric-list POST": Write(
        201,
        body={"name": "new-fabric", "description": "made by the test"},
        check=lambda w, b: Fabric.objects.get(pk=b["id"]).description == "made by the test",
    ),
    "fabric-api:fabric-detail PUT": Write(
        200,
        target=lambda w: w.fabric,
        body={"name": "renamed", "description": "put"},
        check=lambda w, b: b["name"] == "renamed" and Fabric.objects.get(pk=w.fabric.pk).description == "put",
    ),
    "fabric-api:fabric-detail PATCH": Write(
        200,
        target=lambda w: w.fabric,
        body={"description": "patched"},
        check=lambda w, b: b["description"] == Fabric.objects.get(pk=w.fabric.pk).description == "patched",
    ),
    "fabric-api:fabric-detail DELETE": Write(
        204,
        target=lambda w: w.fabric,
        check=lambda w, b: b is None and not Node.objects.filter(fabric_id=w.fabric.pk).exists(),
    ),
    # refused on a CA port (the rule of fabric.services.portactions; nothing sent, the attempt audited)
    "fabric-api:port-port-action POST": Write(
        409,
        target=lambda w: Port.objects.filter(node__fabric=w.fabric, node__node_type="ca")
        .order_by("pk")
        .first(),
        body={"action": "disable", "confirm": True},
        check=lambda w, b: "is a port of a CA" in b["detail"]
        and AuditEntry.objects.get(action="port.disable").changes["done"] is False,
    ),
    "fabric-api:fabric-discover POST": Write(
        202,
        target=lambda w: w.fabric,
        prepare=_live,
        check=lambda w, b: b["queued"] is True
        and b["task_id"] == AuditEntry.objects.get(action="fabric.discover").changes["task_id"],
    ),
    "fabric-api:fabric-import-file POST": Write(
        201,
        target=lambda w: w.fabric,
        body={"text": BASE.replace('"leaf-2"', '"leaf-two"')},
        check=lambda w, b: b["fabric"]["id"] == w.fabric.pk
        and b["summary"]["changed"] >= 1
        and Node.objects.filter(fabric=w.fabric, description="leaf-two").exists(),
    ),
    "fabric-api:fabric-node-name-map PUT": Write(
        200,
        target=lambda w: w.fabric,
        body=lambda w: {
            "text": f'{Node.objects.get(fabric=w.fabric, description="spine-1").node_guid} "core-01"\n'
        },
        check=lambda w, b: (b["entries"], b["renamed"]) == (1, 1)
        and Node.objects.filter(fabric=w.fabric, name="core-01", description="spine-1").exists(),
    ),
    "fabric-api:fabric-node-name-map DELETE": Write(
        200,
        target=lambda w: w.fabric,
        prepare=lambda w: set_node_name_map(
            w.fabric, text=f'{Node.objects.get(fabric=w.fabric, description="spine-1").node_guid} "core-01"\n'
        ),
        check=lambda w, b: (b["source"], b["renamed"]) == ("none", 1)
        and Node.objects.get(fabric=w.fabric, description="spine-1").name == "spine-1",
    ),
    "fabric-api:fabric-switch-roles POST": Write(
        200,
        target=lambda w: w.fabric,
        body={"role": "storage", "switches": ["leaf-2"]},
        check=lambda w, b: (b["switches"], b["changed"]) == (1, 1)
        and Node.objects.get(fabric=w.fabric, description="leaf-2").role == "storage"
        and Node.objects.get(fabric=w.fabric, description="leaf-1").role == "compute",
    ),
    "fabric-api:fabric-import-new POST": Write(
        201,
        body={"fabric": "third", "text": BASE},
        check=lambda w, b: b["summary"]["switches"]
        == Node.objects.filter(fabric__name="third").switches().count()
        == 3,
    ),
    "fabric-api:partition-list POST": Write(
        201,
        body=lambda w: {"fabric": w.fabric.pk, "name": "pool_b", "pkey": "0x0200", "rate": 7},
        check=lambda w, b: Partition.objects.get(pk=b["id"]).pkey == 0x200
        and b["applied_state"] == "pending",
    ),
    "fabric-api:partition-detail PUT": Write(
        200,
        target=lambda w: w.partition,
        body=lambda w: {"fabric": w.fabric.pk, "name": "pool_renamed", "pkey": 0x124},
        check=lambda w, b: (b["name"], b["pkey_hex"]) == ("pool_renamed", "0x0124")
        and Partition.objects.get(pk=w.partition.pk).pkey == 0x124,
    ),
    "fabric-api:partition-detail PATCH": Write(
        200,
        target=lambda w: w.partition,
        body={"sl": 5},
        check=lambda w, b: b["sl"] == Partition.objects.get(pk=w.partition.pk).sl == 5,
    ),
    "fabric-api:partition-detail DELETE": Write(
        204,
        target=lambda w: w.partition,
        check=lambda w, b: b is None
        and not PartitionMember.objects.filter(partition_id=w.partition.pk).exists(),
    ),
    "fabric-api:partition-members PUT": Write(
        200,
        target=lambda w: w.partition,
        body={"members": [{"guid": "0x0002c90300000012", "membership": "both"}]},
        check=lambda w, b: b == {"added": 1, "removed": 2, "changed": 0, "kept": 0}
        and list(PartitionMember.objects.filter(partition=w.partition).values_list("port_guid", "membership"))
        == [("0x0002c90300000012", "both")],
    ),
    # an apply answers 202 with its record at once; the worker runs it after commit
    "fabric-api:partition-apply POST": Write(
        202,
        body=lambda w: {"fabric": w.fabric.pk},
        check=lambda w, b: b["state"] == "queued"
        and PartitionApply.objects.get(pk=b["id"]).fabric_id == w.fabric.pk
        and b["url"].endswith(f"/api/fabric/partition-applies/{b['id']}/"),
    ),
    "fabric-api:partition-import-file POST": Write(
        201,
        body=lambda w: {
            "fabric": w.other.pk,
            "text": "Default=0x7fff, ipoib : ALL=full ;\nP=0x5 : 0x10=full ;\n",
        },
        check=lambda w, b: b["created"] == ["0x7fff", "0x0005"]
        and Partition.objects.filter(fabric=w.other).count() == 2,
    ),
    "events-api:alarm-acknowledge POST": Write(
        200,
        target=lambda w: w.alarm,
        check=lambda w, b: b["state"] == Alarm.objects.get(pk=w.alarm.pk).state == "acknowledged",
    ),
    "events-api:alarm-clear POST": Write(
        200,
        target=lambda w: w.alarm,
        body={"reason": "cable replaced"},
        check=lambda w, b: b["state"] == "cleared"
        and Alarm.objects.get(pk=w.alarm.pk).clear_reason == "cable replaced",
    ),
    "events-api:eventpolicy-detail PUT": Write(
        200,
        target=lambda w: w.policy,
        body={"severity": "warning", "consecutive": 2},
        check=lambda w, b: (b["severity"], b["consecutive"])
        == (
            EventPolicy.objects.get(pk=w.policy.pk).severity,
            EventPolicy.objects.get(pk=w.policy.pk).consecutive,
        )
        == ("warning", 2),
    ),
    "events-api:eventpolicy-detail PATCH": Write(
        200,
        target=lambda w: w.policy,
        body={"severity": "minor"},
        check=lambda w, b: b["severity"] == EventPolicy.objects.get(pk=w.policy.pk).severity == "minor",
    ),
    "events-api:alerttarget-list POST": Write(
        201,
        body={"name": "am", "kind": "alertmanager", "url": "http://127.0.0.1:9", "min_severity": "critical"},
        check=lambda w, b: AlertTarget.objects.get(pk=b["id"]).min_severity == "critical"
        and "secret" not in b,
    ),
    "events-api:alerttarget-detail PUT": Write(
        200,
        target=lambda w: w.alert_target,
        body={"name": "on-call-slack", "kind": "slack", "url": "https://hooks.example.org/T1"},
        check=lambda w, b: AlertTarget.objects.get(pk=w.alert_target.pk).kind == "slack" == b["kind"],
    ),
    "events-api:alerttarget-detail PATCH": Write(
        200,
        target=lambda w: w.alert_target,
        body={"enabled": False},
        check=lambda w, b: b["enabled"] is False
        and not AlertTarget.objects.get(pk=w.alert_target.pk).enabled,
    ),
    "events-api:alerttarget-detail DELETE": Write(
        204,
        target=lambda w: w.alert_target,
        check=lambda w, b: not AlertTarget.objects.filter(pk=w.alert_target.pk).exists(),
    ),
    "events-api:alerttarget-test POST": Write(
        200,
        target=lambda w: w.alert_target,
        check=lambda w, b: b["event"] == "alarm.test" and b["status"] != "delivered" and b["attempts"] == 1,
    ),
    "events-api:healthreport-run POST": Write(
        201,
        body=lambda w: {"fabric": w.fabric.pk},
        check=lambda w, b: HealthReport.objects.get(pk=b["id"]).fabric_id == w.fabric.pk
        and b["trigger"] == "manual"
        and b["summary"]["duplicate_lid"] == 0,
    ),
    "accounts-api:user-list POST": Write(
        201,
        body={"username": "newbie", "email": "newbie@example.org", "role": "operator"},
        check=lambda w, b: b["role"] == "operator" and _user("newbie").email == "newbie@example.org",
    ),
    "accounts-api:user-detail PUT": Write(
        200,
        target=lambda w: w.target,
        body={"username": "target", "email": "moved@example.org", "role": "operator"},
        check=lambda w, b: b["role"] == "operator" and _user("target").email == "moved@example.org",
    ),
    "accounts-api:user-detail PATCH": Write(
        200,
        target=lambda w: w.target,
        body={"is_active": False},
        check=lambda w, b: b["is_active"] is False and not _user("target").is_active,
    ),
    "accounts-api:user-detail DELETE": Write(
        204,
        target=lambda w: w.target,
        check=lambda w, b: b is None and _user("target") is None,
    ),
    # A token route acts on the caller's own tokens (an Admin's: anyone's): the viewer revokes theirs.
    "accounts-api:apitoken-detail DELETE": Write(
        204,
        target=lambda w: ApiToken.objects.filter(user=w.users["viewer"]).first(),
        prepare=lambda w: create_token(w.users["viewer"], "matrix", actor=w.users["viewer"]),
        check=lambda w, b: b is None
        and not ApiToken.objects.filter(user=w.users["viewer"], revoked_at=None).exists(),
    ),
    "accounts-api:user-token POST": Write(
        200,
        check=lambda w, b: check_key(b["token"]).user_id is not None,
    ),
    "devices-api:device-list POST": Write(
        201,
        body=lambda w: {
            "fabric": w.fabric.pk,
            "name": "sw-new",
            "address": "192.0.2.9",
            "community": "c-new",
        },
        check=lambda w, b: Device.objects.get(pk=b["id"]).target().community == "c-new"
        and b["community_set"] is True
        and "community" not in b,
    ),
    "devices-api:device-detail PUT": Write(
        200,
        target=lambda w: w.device,
        body=lambda w: {
            "fabric": w.fabric.pk,
            "name": "sw1b",
            "address": "192.0.2.11",
            "version": "3",
            "user": "ops",
            "auth_protocol": "sha",
            "auth_key": "auth-pass-1",
        },  # fmt: skip
        check=lambda w, b: b["name"] == "sw1b"
        and Device.objects.get(pk=w.device.pk).target().auth_key == "auth-pass-1"
        and not Device.objects.get(pk=w.device.pk).has_secret("community")  # v2c → v3 clears it
        and b["community_set"] is False
        and "auth-pass-1"
        not in str(AuditEntry.objects.filter(action="device.update").values_list("changes")),
    ),
    "devices-api:device-detail PATCH": Write(
        200,
        target=lambda w: w.device,
        body={"poll_interval_s": 30},
        check=lambda w, b: b["poll_interval_s"] == Device.objects.get(pk=w.device.pk).poll_interval_s == 30,
    ),
    "devices-api:device-detail DELETE": Write(
        204,
        target=lambda w: w.device,
        check=lambda w, b: b is None
        and not Interface.objects.filter(device_id=w.device.pk).exists()
        and AuditEntry.objects.filter(action="device.delete", object_id=str(w.device.pk)).count() == 1,
    ),
    "pools-api:tenant-list POST": Write(
        201,
        body=lambda w: {"name": "t-new", "members": [{"user": w.users["viewer"].pk, "role": "viewer"}]},
        check=lambda w, b: list(Tenant.objects.get(pk=b["id"]).memberships.values_list("user_id", "role"))
        == [(w.users["viewer"].pk, "viewer")]
        and b["members"][0]["username"] == w.users["viewer"].username,
    ),
    "pools-api:tenant-detail PUT": Write(
        200,
        target=lambda w: w.other_tenant,
        body={"name": "t-b2", "description": "put", "members": []},
        check=lambda w, b: b["name"] == "t-b2"
        and not Tenant.objects.get(pk=w.other_tenant.pk).memberships.exists(),
    ),
    "pools-api:tenant-detail PATCH": Write(
        200,
        target=lambda w: w.other_tenant,
        body={"description": "patched"},
        check=lambda w, b: Tenant.objects.get(pk=w.other_tenant.pk).description
        == b["description"]
        == "patched",
    ),
    "pools-api:tenant-detail DELETE": Write(
        204,
        target=lambda w: w.other_tenant,
        check=lambda w, b: b is None and not Tenant.objects.filter(pk=w.other_tenant.pk).exists(),
    ),
    "pools-api:pool-list POST": Write(
        201,
        body=lambda w: {
            "name": "p-new",
            "tenant": w.tenant.pk,
            "quota_gpus": 4,
            "guaranteed_gpus": 2,
            "fabric": w.fabric.pk,
            "pkey": "0x0300",
        },
        check=lambda w, b: Pool.objects.get(pk=b["id"]).guaranteed_gpus == 2
        and b["usage"] == {"gpus": 0, "slices": 0, "borrowed_gpus": 0, "borrowed_slices": 0, "free_gpus": 0}
        and (b["pkey"], b["partition"]["pkey_hex"]) == (0x0300, "0x0300")
        and Partition.objects.get(fabric=w.fabric, pkey=0x0300).pool.pk == b["id"],
        audits=2,  # pool.create, and partition.create by the partitions service
    ),
    "pools-api:pool-detail PUT": Write(
        200,
        target=lambda w: w.shared_pool,
        body={"name": "p-shared", "quota_gpus": 8, "guaranteed_gpus": 1},
        check=lambda w, b: (Pool.objects.get(pk=w.shared_pool.pk).quota_gpus, b["quota_gpus"]) == (8, 8),
    ),
    "pools-api:pool-detail PATCH": Write(
        200,
        target=lambda w: w.shared_pool,
        body={"priority_weight": 7},
        check=lambda w, b: b["priority_weight"] == Pool.objects.get(pk=w.shared_pool.pk).priority_weight == 7,
    ),
    "pools-api:pool-detail DELETE": Write(
        204,
        target=lambda w: w.shared_pool,
        check=lambda w, b: b is None and not Pool.objects.filter(pk=w.shared_pool.pk).exists(),
    ),
    "pools-api:allocation-allocate POST": Write(
        201,
        body=lambda w: {
            "pool": w.pool.pk,
            "kind": "mig",
            "count": 2,
            "mig_profile": "3g.40gb",
            "job": "matrix",
        },
        check=lambda w, b: b["state"] == "active"
        and Allocation.objects.get(pk=b["id"]).items.filter(active=True, mig_slice__state="allocated").count()
        == 2
        and len(b["environment"]) == 1,
    ),
    "pools-api:allocation-release POST": Write(
        200,
        target=lambda w: w.allocation,
        body={"reason": "done"},
        check=lambda w, b: b["state"] == Allocation.objects.get(pk=w.allocation.pk).state == "released"
        and not Allocation.objects.get(pk=w.allocation.pk).items.filter(active=True).exists(),
    ),
    # the viewer's script token, bound by an Admin to host001 of the world's fabric (one audit entry)
    "pools-api:agenttoken-detail PUT": Write(
        200,
        target=lambda w: ApiToken.objects.filter(user=w.users["viewer"]).first(),
        body=lambda w: {"hosts": [Host.objects.get(fabric=w.fabric, name="host001").pk]},
        check=lambda w, b: b["hosts"] == [Host.objects.get(fabric=w.fabric, name="host001").pk]
        and b["bindings"][0]["via"] == "admin"
        and AuditEntry.objects.filter(action="agent.hosts").latest("pk").changes["bound"] == ["host001 (f)"],
    ),
    "pools-api:agenttoken-detail PATCH": Write(
        200,
        target=lambda w: ApiToken.objects.filter(user=w.users["operator"]).first(),
        body=lambda w: {"hosts": list(Host.objects.filter(name="host001").values_list("pk", flat=True))},
        check=lambda w, b: len(b["hosts"]) == 2 and {x["host"]["name"] for x in b["bindings"]} == {"host001"},
    ),
    "scheduler-api:job-list POST": Write(
        201,
        body=lambda w: {
            "name": "matrix",
            "pool": w.pool.pk,
            "kind": "mig",
            "count": 1,
            "mig_profile": "3g.40gb",
            "tier": "leaf",
        },  # fmt: skip
        check=lambda w, b: (b["state"], b["tier"], b["tier_name"]) == ("pending", 1, "leaf")
        and Job.objects.get(pk=b["id"]).name == "matrix",
    ),
    "scheduler-api:job-cancel POST": Write(
        200,
        target=lambda w: w.pending_job,
        body={"reason": "matrix"},
        check=lambda w, b: b["state"] == Job.objects.get(pk=w.pending_job.pk).state == "cancelled"
        and b["reason"] == "matrix",
    ),
    # refused: the placed job is not degraded (faults.replace_now; the attempt audited, nothing moved)
    "scheduler-api:job-replace POST": Write(
        409,
        target=lambda w: w.placed_job,
        check=lambda w, b: "nothing to replace" in b["detail"]
        and AuditEntry.objects.get(action="job.replace").changes["done"] is False
        and Job.objects.get(pk=w.placed_job.pk).state == w.placed_job.state,
    ),
    "scheduler-api:job-start POST": Write(
        200,
        target=lambda w: w.placed_job,
        check=lambda w, b: b["state"] == Job.objects.get(pk=w.placed_job.pk).state == "running",
    ),
    "scheduler-api:job-finish POST": Write(
        200,
        target=lambda w: w.placed_job,
        body={"ok": False, "reason": "exit 1"},
        audits=2,
        check=lambda w, b: (b["state"], b["reason"]) == ("failed", "exit 1")
        and Allocation.objects.get(pk=w.placed_job.allocation_id).state == "released",
    ),
}

#: Checks of GET actions other than list and retrieve: (world, body, role) -> True when right.
READ_CHECKS: dict[str, Callable[[World, Any, str], bool]] = {
    # the world's webhook target was never sent to: an empty log
    "events-api:alerttarget-deliveries GET": lambda w, b, role: b == [],
    "fabric-api:fabric-compare GET": lambda w, b, role: b["reference"] is None
    and "no reference" in b["detail"],
    "fabric-api:fabric-node-name-map GET": lambda w, b, role: (b["source"], b["entries"]) == ("none", 0),
    "fabric-api:fabric-map GET": lambda w, b, role: len(b["nodes"]["id"])
    == Node.objects.filter(fabric=w.fabric).count()
    > 0,
    "fabric-api:fabric-partitions-conf GET": lambda w, b, role: b["fabric"] == w.fabric.name
    and "pool_a=0x0123, mtu=4 :" in b["text"]
    and "\t0x0002c90300000010=full, 0x0002c90300000011=limited ;" in b["text"],
    "fabric-api:partition-members GET": lambda w, b, role: [(m["port_guid"], m["membership"]) for m in b]
    == [("0x0002c90300000010", "full"), ("0x0002c90300000011", "limited")],
    # the world's first cable: its two ports, one cable between the pair
    "fabric-api:fabric-map-edge GET": lambda w, b, role: f"?a={b['a']['id']}&b={b['b']['id']}"
    == _first_cable(w)
    and len(b["cables"]) >= 1
    and b["alarms"] == [],
    # the MIG job the queue placed: its one host, marked on the map by its CA's GUID
    "scheduler-api:job-fabric GET": lambda w, b, role: b["job"] == w.placed_job.pk
    and [h["name"] for h in b["hosts"]]
    == [Job.objects.get(pk=w.placed_job.pk).allocation.items.first().gpu.host.name]
    and len(b["highlight"]) == len(b["hosts"][0]["cas"]) >= 1,
    # the placed MIG job is on one host (no pairs) and the world's fabric has no routes read: no links
    "scheduler-api:job-links GET": lambda w, b, role: (b["job"], b["traffic"], b["links"])
    == (w.placed_job.pk, "all-to-all", []),
    # the world's device was never polled: no samples in the default window
    "devices-api:device-history GET": lambda w, b, role: b["device"] == w.device.pk and b["start"] < b["end"],
    "accounts-api:user-me GET": lambda w, b, role: b["username"] == w.users[role].username
    and b["role"] == role,
}


def _first_cable(world: World) -> str:
    link = Link.objects.filter(fabric=world.fabric).select_related("port_a", "port_b").order_by("pk").first()
    return f"?a={link.port_a.node_id}&b={link.port_b.node_id}"


#: Query strings of GET actions that need one: (world) -> "?…".
READ_QUERIES: dict[str, Callable[[World], str]] = {
    "fabric-api:fabric-map-edge GET": _first_cable,
}


def url_of(route: Route, world: World, target=None) -> str:
    query = READ_QUERIES[route.id](world) if route.id in READ_QUERIES else ""
    if not route.detail:
        return reverse(route.name) + query
    if target is None:
        case = WRITES.get(route.id)
        target = case.target(world) if case and case.target else first_of(route)
    return reverse(route.name, kwargs={route.lookup_kwarg: target.pk}) + query


def first_of(route: Route):
    return route.viewset.queryset.order_by("pk").first()


def send(client: APIClient, route: Route, url: str, world: World):
    """The route's request: a GET, or the write with its case's JSON body."""
    if route.safe:
        return client.get(url)
    payload = WRITES[route.id].payload(world)
    return client.generic(
        route.method, url, json.dumps(payload) if payload is not None else "", "application/json"
    )


def body_of(resp):
    return resp.json() if resp.content else None


# --- the tests ---------------------------------------------------------------------------------


#: Routes whose rows belong to the caller (a Viewer sees and revokes their own tokens, an Admin
#: anyone's): not a role ladder, so the matrix below does not apply; accounts/tests/test_tokens.py
#: tests owner, other user, Admin and superuser for each.
OWNER_SCOPED = {
    "accounts-api:apitoken-list GET",
    "accounts-api:apitoken-detail GET",
    "accounts-api:apitoken-detail DELETE",
}


def test_every_route_has_a_case():
    """A new write route needs a :data:`WRITES` case, a new GET action a :data:`READ_CHECKS` entry."""
    writes = {r.id for r in ROUTES if not r.safe}
    reads = {r.id for r in ROUTES if r.safe and r.action not in ("list", "retrieve")}
    assert len(ROUTES) >= 40 and writes and reads  # the walk finds the routers
    assert writes == set(WRITES), "describe the new write routes in WRITES"
    assert reads == set(READ_CHECKS), "describe the new GET actions in READ_CHECKS"
    assert set(LEAST_ROLE) <= {r.id for r in ROUTES}


#: Routes whose 401 challenges more than a token: the token endpoint takes a user name and
#: password (Basic) to issue one (``accounts.api.views.TOKEN_CHALLENGE``).
CHALLENGES = {"accounts-api:user-token POST": 'Basic realm="api", Token realm="api"'}


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.id)
def test_permission_matrix(route, world, clients, django_capture_on_commit_callbacks):
    if route.id in OWNER_SCOPED:
        resp = send(
            clients["anonymous"],
            route,
            url_of(route, world) if route.action == "list" else "/api/accounts/tokens/1/",
            world,
        )
        assert (resp.status_code, resp["WWW-Authenticate"]) == (401, 'Token realm="api"')
        return
    least = least_role(route)
    case = WRITES.get(route.id)
    assert route.safe or case is not None, f"{route.id}: add a WRITES case"
    if case and case.prepare:
        case.prepare(world)
    url = url_of(route, world)
    for role in ROLES:
        allowed = RANK[role] >= RANK[least]
        if not allowed:
            before = stored()
            resp = send(clients[role], route, url, world)
            if role == "anonymous":
                assert (resp.status_code, resp.json()) == (401, {"detail": ANONYMOUS_DETAIL}), role
                assert resp["WWW-Authenticate"] == CHALLENGES.get(route.id, 'Token realm="api"')
            else:
                assert (resp.status_code, resp.json()) == (403, {"detail": RolePermission.message}), role
            assert stored() == before, f"{role} was refused but something was stored"
        elif route.safe:
            resp = send(clients[role], route, url, world)
            assert resp.status_code == 200, (role, resp.content[:300])
            check_read(route, world, resp.json(), role)
        else:
            audited = audit_ids()
            with transaction.atomic():  # each allowed role writes on the same data: roll back after
                with django_capture_on_commit_callbacks() as callbacks:
                    resp = send(clients[role], route, url, world)
                assert resp.status_code == case.status, (role, resp.content[:300])
                assert case.check(world, body_of(resp)), (role, body_of(resp))
                assert len(audit_ids() - audited) == case.audits, (
                    f"{route.id} by {role}: {case.audits} audit entries"
                )
                if route.id == "fabric-api:fabric-discover POST":
                    assert len(callbacks) == 1  # the discovery, queued when the request commits
                transaction.set_rollback(True)


def check_read(route: Route, world: World, body, role: str) -> None:
    queryset = route.viewset.queryset.all()
    if route.action == "list":
        count = queryset.count()
        assert count >= 2, f"{route.id}: the world fixture needs two rows of {queryset.model.__name__}"
        assert body["count"] == count
        assert len(body["results"]) == min(count, api_settings.PAGE_SIZE)
        assert {r["id"] for r in body["results"]} <= set(queryset.values_list("pk", flat=True))
    elif route.action == "retrieve":
        assert body["id"] == first_of(route).pk
    else:
        assert READ_CHECKS[route.id](world, body, role), body


WRITE_ROUTES = [r for r in ROUTES if not r.safe]


class AuditWriteFailed(RuntimeError):
    pass


@pytest.mark.parametrize("route", WRITE_ROUTES, ids=lambda r: r.id)
def test_write_is_not_stored_when_its_audit_entry_fails(
    route, world, clients, monkeypatch, django_capture_on_commit_callbacks
):
    """NetBox wraps perform_create/update/destroy in ``transaction.atomic``: the change and its
    audit entry commit together or not at all, and nothing is queued on commit."""
    case = WRITES[route.id]
    if case.prepare:
        case.prepare(world)
    client = clients[least_role(route)]  # signed in before the audit log breaks (logins are audited)
    url = url_of(route, world)
    before = stored()

    def fail(*args, **kwargs):
        raise AuditWriteFailed("the audit log is unavailable")

    monkeypatch.setattr(audit, "record", fail)
    with django_capture_on_commit_callbacks(execute=True) as callbacks, pytest.raises(AuditWriteFailed):
        send(client, route, url, world)
    assert callbacks == []
    assert stored() == before


LIST_ROUTES = [r for r in ROUTES if r.action == "list"]


def _brief_fields(viewset) -> list[str] | None:
    """The brief form a viewset answers for ``?brief=1`` (``core.api.views.BriefModeMixin``: its
    serializer's ``Meta.brief_fields``, ``core.api.serializers``), or None."""
    if not issubclass(viewset, BriefModeMixin):
        return None
    return getattr(getattr(viewset.serializer_class, "Meta", None), "brief_fields", None)


BRIEF_ROUTES = [r for r in ROUTES if r.action in ("list", "retrieve") and _brief_fields(r.viewset)]


@pytest.mark.parametrize("route", BRIEF_ROUTES, ids=lambda r: r.id)
def test_brief_form(route, world, admin):
    """``?brief=1`` answers the brief serializer's fields only (NetBox ``brief_fields``)."""
    url = url_of(route, world)
    full = admin.get(url).json()
    brief = admin.get(url, {"brief": 1}).json()
    if route.action == "list":
        full, brief = full["results"][0], brief["results"][0]
    fields = set(_brief_fields(route.viewset))
    assert set(brief) == fields and "id" in fields
    assert fields < set(full) and brief["id"] == full["id"]
    scalars = [k for k in fields if not isinstance(full[k], dict) and not isinstance(brief[k], dict)]
    assert {k: brief[k] for k in scalars} == {k: full[k] for k in scalars}  # the same object


def exact_filters(route: Route) -> dict:
    """The filters made from model fields (``Meta.fields``/``filterset_fields``): exact lookups."""
    fs = DjangoFilterBackend().get_filterset_class(route.viewset(), route.viewset.queryset)
    assert fs is not None, f"{route.id}: no filterset (STYLE.md: filter by id and natural key)"
    return {
        name: f
        for name, f in fs.base_filters.items()
        if name not in fs.declared_filters and f.lookup_expr == "exact" and getattr(f, "method", None) is None
    }


def _param(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@pytest.mark.parametrize("route", LIST_ROUTES, ids=lambda r: r.id)
def test_list_filters_match_the_database(route, world, admin):
    url = url_of(route, world)
    admin.get(url)  # a list may create rows on first read (event policies); compare afterwards
    queryset = route.viewset.queryset.all()
    model = queryset.model
    total = queryset.count()
    filters = exact_filters(route)
    assert filters, f"{route.id}: no model-field filter"
    narrowed = 0
    for name, f in filters.items():
        # a filter across a relation (``user__username``) compares the related value itself
        attname = f.field_name if "__" in f.field_name else model._meta.get_field(f.field_name).attname
        # django-filter ignores an empty value (no filter): "" is not a value to filter by
        values = [
            v for v in queryset.order_by().values_list(attname, flat=True).distinct() if v not in (None, "")
        ]
        for value in values[:3]:
            expected = set(queryset.filter(**{attname: value}).values_list("pk", flat=True))
            body = admin.get(url, {name: _param(value), "limit": 1000}).json()
            assert body["count"] == len(expected), (name, value, body)
            assert {r["id"] for r in body["results"]} == expected, (name, value)
            narrowed += len(expected) < total
    assert narrowed, f"{route.id}: no filter value selected fewer than all rows; vary the world's rows"


# --- rows, not only status codes: a tenant user sees none of another tenant's rows (issue 22) ----

#: How a row of a listed model belongs to a tenant (a lookup giving the tenant id, None for a
#: fabric-wide row). A listed model with a relation to tenants, pools, allocations or jobs must be
#: here (:func:`test_every_listed_model_with_tenant_data_says_whose_rows_they_are`).
TENANT_OF = {
    "pools.Tenant": ["pk"],
    "pools.Pool": ["tenant_id"],
    "pools.Allocation": ["tenant_id"],
    "scheduler.Job": ["tenant_id"],
    "scheduler.JobDecision": ["job__tenant_id"],
    "events.Event": ["tenant_id"],
    "events.Alarm": ["tenant_id"],
    "fabric.Partition": ["pool__tenant_id", "job__tenant_id"],
    "fabric.Fabric": [],  # a fabric's pools are listed by the pools API, not in the fabric's row
    "auth.User": [],  # Admin only
}
_TENANT_MODELS = {"pools.Tenant", "pools.Pool", "pools.Allocation", "scheduler.Job", "pools.TenantMembership"}


def _tenant_user(name: str, tenant) -> APIClient:
    user = get_user_model().objects.create_user(name)
    set_role(user, "viewer")
    TenantMembership.objects.create(tenant=tenant, user=user, role="viewer")
    client = APIClient()
    client.force_authenticate(user)
    return client


def _tenant_partitions(world) -> None:
    """Each of the world's two tenants gets a pool with a partition on the world's fabric, and the
    partitions service records what an apply of them writes: a ``partition.drift`` per partition
    and a ``partition.apply_failed`` naming both (through its own writers, then the alarm engine)."""
    from events.engine import process_pending_events
    from fabric.services.partitions.opensm import ApplyResult, record_failure, record_outcome
    from pools.services.partitions import set_pool_pkey

    parts = []
    for n, tenant in enumerate((world.tenant, world.other_tenant)):
        pool = Pool.objects.create(name=f"p-pkey-{n}", tenant=tenant, fabric=world.fabric)
        set_pool_pkey(pool, 0x0A01 + n)
        parts.append(Partition.objects.get(pk=Pool.objects.get(pk=pool.pk).partition_id))
    rows = [
        {
            "partition": p.name,
            "pkey": p.pkey_hex,
            "guid": "0x0002c90300000011",
            "expected": "full",
            "seen": "",
        }
        for p in parts
    ]
    fabric = world.fabric
    record_outcome(fabric, parts, ApplyResult(fabric=fabric.name, drift=rows, sha256="ab" * 32), None)
    failed = ApplyResult(
        fabric=fabric.name, error="not verified", unverified=[r | {"error": "timeout"} for r in rows]
    )
    record_failure(fabric, parts, failed, None)
    process_pending_events(fabric.pk)
    assert Alarm.objects.filter(code="partition.drift").count() == 2  # one per partition


def _tenant_names(world) -> dict[int, set[str]]:
    """The names only a tenant's members may read, by tenant: its pools', jobs' and partitions'."""
    out: dict[int, set[str]] = {}
    for pk, name in Pool.objects.filter(tenant__isnull=False).values_list("tenant_id", "name"):
        out.setdefault(pk, set()).add(name)
    for pk, name in Job.objects.values_list("tenant_id", "name"):
        out.setdefault(pk, set()).add(name)
    for pool_t, job_t, name in Partition.objects.values_list("pool__tenant_id", "job__tenant_id", "name"):
        if (pool_t or job_t) is not None:
            out.setdefault(pool_t or job_t, set()).add(name)
    return out


def test_every_listed_model_with_tenant_data_says_whose_rows_they_are():
    for route in LIST_ROUTES:
        model = route.viewset.queryset.model
        related = {
            f.related_model._meta.label
            for f in model._meta.get_fields()
            if getattr(f, "related_model", None) is not None
        }
        if related & _TENANT_MODELS:
            assert model._meta.label in TENANT_OF, f"{route.id}: say in TENANT_OF whose rows these are"


@pytest.mark.parametrize("route", LIST_ROUTES, ids=lambda r: r.id)
def test_a_tenant_user_sees_none_of_another_tenants_rows(route, world, admin):
    """Two tenant users (a Viewer of t-a only, one of t-b only): every row each may list is
    fabric-wide or their own tenant's, and for a model with tenant data each tenant has rows the
    other does not see (so the check can fail). Fabric-wide staff (the world's Admin) see both."""
    model = route.viewset.queryset.model
    lookups = TENANT_OF.get(model._meta.label, [])
    # t-b gets a pool and a job (and its decision) of its own beside the world's t-a ones
    pool_b = Pool.objects.create(name="p-b", tenant=world.other_tenant, quota_gpus=2)
    submit(JobSpec(name="job-b", pool_id=pool_b.pk, count=1), user=world.users["admin"])
    run_pass()
    if model in (Partition, Event, Alarm):  # each tenant's pool gets its PKey (a partition pool_<id>)
        _tenant_partitions(world)
    users = {world.tenant.pk: _tenant_user("only-a", world.tenant),
             world.other_tenant.pk: _tenant_user("only-b", world.other_tenant)}  # fmt: skip
    url = url_of(route, world)
    all_rows = {r["id"] for r in admin.get(url, {"limit": 1000}).json()["results"]}
    owner: dict[int, int | None] = {}
    for lookup in lookups:
        for pk, tenant_id in model._default_manager.filter(pk__in=all_rows).values_list("pk", lookup):
            owner[pk] = owner.get(pk) or tenant_id
    secrets = _tenant_names(world)
    for tenant_id, client in users.items():
        resp = client.get(url, {"limit": 1000})
        if resp.status_code == 403:  # an Admin-only list: no rows at all
            continue
        assert resp.status_code == 200, (route.id, resp.status_code)
        seen = {r["id"] for r in resp.json()["results"]}
        foreign = {pk for pk in seen if owner.get(pk) not in (None, tenant_id)}
        assert not foreign, (
            f"{route.id}: tenant {tenant_id}'s user sees rows {sorted(foreign)} of another tenant"
        )
        # and no row names another tenant's pool, job or partition, whoever it says it belongs to
        # (a fabric-wide partition.drift event named a tenant's partition, issue 22)
        named = {
            (r["id"], name)
            for r in resp.json()["results"]
            for other, names in secrets.items()
            if other != tenant_id
            for name in names
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", json.dumps(r))
        }
        assert not named, (
            f"{route.id}: tenant {tenant_id}'s user reads another tenant's names {sorted(named)}"
        )
    if lookups:  # the world gives both tenants rows here, visible to the Admin
        assert {owner.get(pk) for pk in all_rows} >= set(users), (route.id, owner)
