"""Schemathesis against Weft's own OpenAPI schema (drf-spectacular), on SQLite (``bin/test``'s
first pass): every operation, generated requests with a fixed seed and a bounded budget, as an
Admin with a token, over a small stored fabric. Checks: no server error (5xx) and every response
matches the schema (which means the schema tells the truth: nullable fields, enums, required
properties).

Stateless: each operation on its own (``schema.parametrize``). Stateful: schemathesis' state
machine chains operations through the links it infers (create → read → update → delete).

The budget, per operation (~140 of them, one test each):

* schemathesis' coverage phase (explicit examples, built when the module is collected, in every
  process that collects it) in its **positive** mode only: every documented value at its bounds,
  each enum value, required-only and required-plus-optional bodies (~5,000 requests in all). These
  reach the services with valid data, where a 5xx comes from. Its negative mode (~13,400 more:
  each field of each body with each wrong type, read-only fields sent back, whole bodies of the
  wrong type, undocumented methods) sends what the serializers' field validation refuses with a
  400 before any Weft code runs; it cost about two thirds of this module's time (and ~25 s of CPU
  at each collection), for what ``tests/test_bad_input.py`` and ``tests/test_bad_params.py`` test
  by name.
* hypothesis' generated examples, positive and negative (``EXAMPLES``, 25 by default): random
  values of both kinds, wrong types included, with a fixed seed.

Run on SQLite only (no ``backend`` marker): the contract is the serializers' and the views', the
same on either database; behaviour that differs by database is tested by the ``backend`` tests.
"""

from __future__ import annotations

import os

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, transaction
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
#: hypothesis' generated examples per operation (the module docstring gives the budget)
EXAMPLES = int(os.environ.get("WEFT_SCHEMATHESIS_EXAMPLES", "25"))
#: schemathesis' configuration: the coverage phase in its positive mode only (module docstring)
CONFIG = SchemathesisConfig.from_dict({"phases": {"coverage": {"generation": {"mode": "positive"}}}})

schema = schemathesis.openapi.from_dict(
    SchemaGenerator().get_schema(request=None, public=True), config=CONFIG
)
schema.app = get_wsgi_application()


@pytest.fixture(scope="module")
def admin_headers(django_db_setup, django_db_blocker, realdata):
    """An Admin's token header (``{"Authorization": "Token <key>"}``) over a stored fabric (a real
    file), a discovery, an event and an alarm, so reads of single objects find something.

    Made once per module (and xdist worker) inside a transaction that is rolled back at the
    module's end, as Django's ``TestCase.setUpTestData``: each test's own transaction
    (``django_db``) nests in it as a savepoint, so what a test writes is undone and the next test
    starts from these rows (importing the topology for each of ~100 tests took ~1 s each)."""
    from django.contrib.auth import get_user_model

    from accounts.roles import set_role
    from accounts.tokens import create_token
    from events.engine import process_pending_events
    from events.health import run_report
    from events.services import EventSpec, record_events
    from fabric.services.ingest import import_topology_text

    with django_db_blocker.unblock():
        module_atomic = transaction.atomic()
        module_atomic.__enter__()
    try:
        with django_db_blocker.unblock():
            user = get_user_model().objects.create_user(
                "st-admin", email="st@example.org", password="pw-st-admin-1"
            )
            set_role(user, "admin")
            text = (realdata / "ibnetdiscover/ibtopotool_1_manpage_voltaire.topo").read_text()
            discovery = import_topology_text("st", text, filename="voltaire.topo")
            record_events(
                discovery.fabric,
                [EventSpec("link.down", "a link went down", object_type="link", object_key="k")],
            )
            process_pending_events(discovery.fabric_id)
            run_report(discovery.fabric, trigger="scheduled")  # no user: created_by is null
            headers = {"Authorization": f"Token {create_token(user, 'schemathesis', actor=user).key}"}
        # As Django's test client does: the WSGI handler must not close the test's database
        # connection after each request (it would, with CONN_MAX_AGE 0, and the transaction is on it).
        request_started.disconnect(close_old_connections)
        request_finished.disconnect(close_old_connections)
        try:
            yield headers
        finally:
            request_started.connect(close_old_connections)
            request_finished.connect(close_old_connections)
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            module_atomic.__exit__(None, None, None)


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    derandomize=True,  # a fixed seed: the same requests in every run
    deadline=None,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.explicit, Phase.generate],
)
def test_stateless(case, admin_headers):
    case.call_and_validate(headers=admin_headers, checks=CHECKS)


@pytest.mark.django_db
def test_stateful(admin_headers):
    base = schema.as_state_machine()

    class Machine(base):
        def setup(self):
            # every run starts from the fixture's rows: what a previous run created is rolled back
            self._atomic = transaction.atomic()
            self._atomic.__enter__()

        def teardown(self):
            transaction.set_rollback(True)
            self._atomic.__exit__(None, None, None)

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            case.validate_response(response, checks=CHECKS)

        def get_call_kwargs(self, case):
            return {"headers": admin_headers}

    Machine.run(
        settings=settings(
            max_examples=EXAMPLES,
            derandomize=True,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            stateful_step_count=6,
            phases=[
                Phase.explicit,
                Phase.generate,
            ],  # no shrinking: ids from the database differ between replays
        )
    )


@pytest.mark.django_db
def test_error_answers_and_brief_forms_are_documented(admin_headers):
    """The answers schemathesis found undocumented (issue 22: 202 cases, mostly status codes):
    each one now matches the document with every conformance check on, quickly and by name."""
    from fabric.models import Fabric

    fabric = Fabric.objects.get(name="st")
    cases = [
        # (operation, Case arguments, expected status)
        (("/api/fabric/fabrics/{id}/", "GET"), {"path_parameters": {"id": 999999}}, 404),
        (
            ("/api/fabric/fabrics/{id}/", "PATCH"),
            {"path_parameters": {"id": fabric.pk}, "body": {"ca_port": 0}},
            400,
        ),
        (("/api/fabric/fabrics/", "GET"), {"query": {"limit": "x"}}, 200),
        (("/api/fabric/fabrics/", "GET"), {"query": {"brief": "true"}}, 200),
        (("/api/fabric/nodes/", "GET"), {"query": {"brief": "true", "limit": 3}}, 200),
        (("/api/scheduler/jobs/{id}/cancel/", "POST"), {"path_parameters": {"id": 999999}, "body": {}}, 404),
        (
            ("/api/pools/allocations/{id}/release/", "POST"),
            {"path_parameters": {"id": 999999}, "body": {}},
            404,
        ),
        (("/api/fabric/fabrics/", "POST"), {"body": {"name": "st"}}, 400),  # the name is taken
    ]
    for (path, method), kwargs, status in cases:
        media = {"media_type": "application/json"} if "body" in kwargs else {}
        case = schema[path][method].Case(**kwargs, **media)
        response = case.call(headers=admin_headers)
        assert response.status_code == status, (path, method, response.status_code, response.text[:300])
        case.validate_response(response, checks=CHECKS)
    # no credentials at all: 401, documented
    case = schema["/api/fabric/fabrics/"]["GET"].Case()
    response = case.call()
    assert response.status_code == 401
    case.validate_response(response, checks=CHECKS)
