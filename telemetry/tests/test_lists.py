"""The counter lists and the sweep summary are defined once: every user agrees with
``telemetry.semantics`` and with the ``PortCounters``/``Sweep`` models."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction
from prometheus_client.parser import text_string_to_metric_families

from fabric.models import Fabric, Node, Port
from telemetry import metrics, semantics
from telemetry.api import heatmap
from telemetry.collectors import madpoll
from telemetry.models import RAW_COUNTERS, PortCounters, Sweep
from telemetry.services.sweep import store as sweep_store


def test_raw_counters_are_one_list():
    assert len(semantics.ALL_COUNTERS) == 16
    assert madpoll.FIELDS == RAW_COUNTERS == semantics.ALL_COUNTERS
    model_fields = {f.name for f in PortCounters._meta.get_fields()}
    assert set(RAW_COUNTERS) <= model_fields


def test_derived_fields_are_the_float_fields_of_derived_and_columns_of_port_counters():
    floats = tuple(f.name for f in fields(semantics.Derived) if f.type == "float | None")
    assert semantics.DERIVED_FIELDS == floats
    model_fields = {f.name: f for f in PortCounters._meta.get_fields()}
    assert all(model_fields[name].get_internal_type() == "FloatField" for name in semantics.DERIVED_FIELDS)


@pytest.fixture
def polled(db):
    fabric = Fabric.objects.create(name="f")
    node = Node.objects.create(
        fabric=fabric, node_guid="0x0000000000000001", node_type="ca", description="h1"
    )
    port = Port.objects.create(node=node, port_num=1, lid=5, rate_gbps=200.0)
    sweep = Sweep.objects.create(
        fabric=fabric,
        started=datetime(2026, 1, 1, tzinfo=UTC),
        duration_s=0.5,
        interval_s=10.0,
        ports=1,
        stale=0,
        saturated=1,
        saturated_ports=1,
        resets=0,
        mechanism="mad",
    )
    rates = {name: 0.1 * (i + 1) for i, name in enumerate(semantics.DERIVED_FIELDS)}
    PortCounters.objects.create(port=port, sweep=sweep, sampled_at=sweep.started, symbol_errors=3, **rates)
    return fabric, port, sweep, rates


def test_show_port_and_the_heatmap_port_document_show_every_derived_value(polled):
    fabric, port, _sweep, rates = polled
    out = StringIO()
    call_command("show_port", "h1", "1", stdout=out)
    shown = json.loads(out.getvalue().splitlines()[-1])
    assert {name: shown[name] for name in semantics.DERIVED_FIELDS} == rates
    assert shown["raw"]["symbol_errors"] == 3
    assert heatmap.cell_detail(port)["counters"]["rates"] == rates


def test_the_sweep_stores_each_derived_value_in_its_column(polled):
    _fabric, port, sweep, _rates = polled
    values = {name: 1.5 * (i + 1) for i, name in enumerate(semantics.DERIVED_FIELDS)}
    d = semantics.Derived(**values, error_deltas={"symbol_errors": 2})
    raw = tuple(range(100, 116))
    with transaction.atomic():
        sweep_store.upsert(
            sweep.pk, [(port.pk, raw, True, sweep.started, d, ["xmit_wait"], False, False, "")]
        )
    row = PortCounters.objects.get(port=port)
    assert {name: getattr(row, name) for name in semantics.DERIVED_FIELDS} == values
    assert {name: getattr(row, name) for name in RAW_COUNTERS} == dict(zip(RAW_COUNTERS, raw, strict=True))
    assert (row.error_deltas, row.saturated, row.extended) == ({"symbol_errors": 2}, ["xmit_wait"], True)


def test_metrics_export_every_raw_counter_and_no_derived_value(polled):
    """Every raw counter is a ``_total`` counter under one name (data words x 4 as bytes), the error
    counters also summed; the derived values are left to PromQL (issue 23: no per-port rate gauges)."""
    _fabric, port, _sweep, _rates = polled
    raw = {name: 10 * (i + 1) for i, name in enumerate(RAW_COUNTERS)}
    PortCounters.objects.filter(port=port).update(**raw)
    sample = {
        s.name: s.value
        for fam in text_string_to_metric_families(
            metrics.render(dict(Fabric.objects.values_list("id", "name")))
        )
        for s in fam.samples
        if s.labels.get("port") == "1" and s.name.startswith("weft_port_")
    }
    renamed = {
        "xmit_data": ("weft_port_xmit_bytes_total", 4),
        "rcv_data": ("weft_port_rcv_bytes_total", 4),
        "xmit_pkts": ("weft_port_xmit_packets_total", 1),
        "rcv_pkts": ("weft_port_rcv_packets_total", 1),
        "xmit_wait": ("weft_port_xmit_wait_ticks_total", 1),
    }
    for name, value in raw.items():
        metric, scale = renamed.get(name, (f"weft_port_{name}_total", 1))
        assert sample.pop(metric) == value * scale, name
    assert sample.pop("weft_port_errors_total") == sum(raw[n] for n in semantics.ERROR_COUNTERS)
    assert sample == {"weft_port_info": 1.0}


def test_show_port_of_a_port_never_polled_names_every_derived_value(polled):
    _fabric, port, _sweep, _rates = polled
    Port.objects.create(node=port.node, port_num=2)
    out = StringIO()
    call_command("show_port", "h1", "2", stdout=out)
    shown = json.loads(out.getvalue().splitlines()[-1])
    assert shown["stale"] is True
    assert {name: shown[name] for name in semantics.DERIVED_FIELDS} == dict.fromkeys(semantics.DERIVED_FIELDS)


def test_sweep_summary(polled):
    _fabric, _port, sweep, _rates = polled
    assert sweep.summary() == {
        "fabric": "f",
        "sweep": sweep.pk,
        "status": "ok",
        "ports": 1,
        "stale": 0,
        "duration_s": 0.5,
        "saturated": 1,
        "saturated_ports": 1,
        "resets": 0,
        "interval_s": 10.0,
        "mechanism": "mad",
    }
