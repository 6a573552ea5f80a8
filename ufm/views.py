"""The UFM-compatible REST API's handlers (thin: read the request with ``ufm.inputs``, answer with
``ufm.payloads``, change through ``ufm.services``/``ufm.isolation``).

Each handler is served under ``/ufmRest/`` (HTTP Basic), ``/ufmRestV3/`` (UFM token) and
``/ufmRestV2/`` (session of ``/dologin``), see ``ufm.urls`` and ``ufm.auth``, with and without a
trailing slash (no redirect: a redirect loses a client's POST body). Answers are JSON; errors
``{"error": message, "field": name}`` with 400 (bad input, naming the field), 401/403 (auth,
role), 404, 409 (a change Weft refuses), 429 (sign-in locked), 502 (a fabric tool failed), 503
(nothing to serve yet, the database is unavailable, or the fabric's collector site has no live
worker for a port isolation: never an empty list a client would act on, with ``Retry-After``).

The client sources each handler was checked against are named in its docstring:

* Volcano: ``volcano-sh/volcano`` ``pkg/controllers/hypernode/discovery/ufm/ufm.go``
* ib-kubernetes: ``Mellanox/ib-kubernetes`` ``pkg/sm/plugins/ufm/ufm.go`` (and
  ``pkg/drivers/http/client.go``: Basic auth, JSON, exactly 200)
* NVIDIA Carbide: ``NVIDIA/bare-metal-manager-core`` ``crates/api/src/ib/ufmclient/mod.rs`` and
  ``crates/api/src/ib/ufmclient/rest.rs`` (``/ufmRestV3`` with ``Authorization: Basic <token>``;
  a GET answering ``{}`` means "not found")
* UFM SDK: ``Mellanox/ufm_sdk_3.0`` ``scripts/ufm_pkeys/ufm_pkeys.py`` and
  ``utils/ufm_rest_client.py``
* UFM Slurm plugin: ``Mellanox/ufm_sdk_3.0`` ``plugins/SLURM-Integration/ufm_slurm_utils.py``
  (prolog ``ufm_slurm_prolog.py``, epilog ``ufm_slurm_epilog.py``)
"""

from __future__ import annotations

import json
import logging

from django.contrib.auth import authenticate, login
from django.db import DatabaseError
from django.http import JsonResponse
from django.middleware.csrf import get_token
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.login_throttle import lockout_response
from accounts.roles import Role, has_role
from accounts.tokens import create_token
from core.sites import SiteDown
from events.models import Event
from events.services import EventNotDeletable, delete_event

from . import inputs, payloads, services
from .auth import UfmBasicAuthentication, UfmPermission
from .inputs import UfmInputError
from .isolation import IsolationFailed, job_payload, set_device_health, set_port_health, unhealthy_ports
from .models import UfmJob
from .services import UfmNotFound, UfmRefused, UfmUnavailable

log = logging.getLogger(__name__)
#: seconds a client is told to wait after a 503
RETRY_AFTER_S = 30
#: largest request body read, bytes (a PKey with 100,000 GUIDs is about 2.5 MB)
MAX_BODY = 16 << 20


def _error(status: int, message: str, field: str = "", **extra) -> Response:
    body = {"error": message, **({"field": field} if field else {}), **extra}
    return Response(body, status=status)


def _flag(request, name: str) -> bool:
    """A boolean query parameter (``?guids_data=true``); absent is false.

    Raises:
        UfmInputError: a value other than true/false.
    """
    value = request.query_params.get(name)
    return False if value is None else inputs.parse_bool(value, name)


class RawBodyParser(BaseParser):
    """Any body, as bytes: the handlers read JSON themselves (``UfmView.body``), whatever
    ``Content-Type`` a client sends (the UFM clients send ``application/json``, with or without a
    charset; a session's CSRF check reads the form fields of ``request.POST`` through it)."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None) -> bytes:
        return stream.read(MAX_BODY + 1) if stream is not None else b""


class UfmView(APIView):
    """Base of the handlers: Basic authentication by default (``ufm.urls`` sets the class per
    prefix), :class:`ufm.auth.UfmPermission`, JSON only, the errors of the module docstring.
    Left out of Weft's OpenAPI schema (its shapes are UFM's; the README lists them)."""

    authentication_classes = [UfmBasicAuthentication]
    permission_classes = [UfmPermission]
    renderer_classes = [JSONRenderer]
    parser_classes = [RawBodyParser]
    throttle_classes: list = []
    schema = None
    #: who may make this view's changes (``ufm.auth.UfmPermission``)
    change = "admin"

    def body(self) -> object:
        """The request body as JSON (an empty body is ``{}``).

        Raises:
            UfmInputError: not JSON (field ``body``), or too long.
        """
        raw = self.request.data
        raw = raw if isinstance(raw, bytes) else b""
        if len(raw) > MAX_BODY:
            raise UfmInputError("body", f"is longer than {MAX_BODY} bytes")
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise UfmInputError("body", f"is not JSON ({exc})") from None
        except RecursionError:  # nested deeper than the stack: a 500 before
            raise UfmInputError("body", "is not JSON (nested too deep)") from None

    def fabric(self, *, topology: bool = False):
        fabric = services.served_fabric()
        if topology:
            services.require_topology(fabric)
        return fabric

    def handle_exception(self, exc):
        if isinstance(exc, UfmInputError):
            return _error(400, str(exc), exc.field)
        if isinstance(exc, UfmNotFound):
            return _error(404, str(exc))
        if isinstance(exc, UfmRefused):
            return _error(409, str(exc))
        if isinstance(exc, IsolationFailed):
            return _error(502, str(exc), ports=exc.results)
        if isinstance(exc, SiteDown):  # the fabric's site has no live worker: nothing was sent
            response = _error(503, str(exc), **{k: v for k, v in exc.as_dict().items() if k != "detail"})
            response["Retry-After"] = str(RETRY_AFTER_S)
            return response
        if isinstance(exc, (UfmUnavailable, DatabaseError)):
            if isinstance(exc, DatabaseError):
                log.warning("UFM API: database unavailable: %s", exc)
                exc = UfmUnavailable("the database is unavailable")
            response = _error(503, str(exc))
            response["Retry-After"] = str(RETRY_AFTER_S)
            return response
        return super().handle_exception(exc)


# -- app -----------------------------------------------------------------------------------------


class VersionView(UfmView):
    """``GET /app/ufm_version`` -> ``{"ufm_release_version": "6.19.0"}`` (the UFM REST API level
    these answers follow). ib-kubernetes (``Validate``) needs exactly 200; the Slurm plugin
    (``IsUfmRunning``) a JSON body; Carbide (``version``) the string."""

    def get(self, request):
        return Response({"ufm_release_version": payloads.UFM_API_VERSION})


class TokenView(UfmView):
    """``POST /app/tokens`` -> ``{"access_token": key}``: a new Weft API token for the caller,
    for ``/ufmRestV3`` (``Authorization: Basic <key>``). UFM SDK ``utils/ufm_rest_client.py``
    ``generate_token`` (``POST ufmRest/app/tokens`` with Basic auth, reads ``access_token``)."""

    change = "self"

    def post(self, request):
        issued = create_token(request.user, "UFM API token", reason="ufm api", actor=request.user)
        return Response({"access_token": issued.key})


class SmConfView(UfmView):
    """``GET /app/smconf`` -> ``{"subnet_prefix", "m_key", "sm_key", "sa_key",
    "m_key_per_port"}``; the keys only for an Admin (``ufm.payloads.smconf``). Carbide
    ``get_sm_config`` (every field required)."""

    def get(self, request):
        fabric = self.fabric()
        return Response(payloads.smconf(fabric, secrets=has_role(request.user, Role.ADMIN)))


class VersioningView(UfmView):
    """``GET /app/versioning`` -> ``{"switches_version", "ports_version", "links_version",
    "alarms_version", "events_version"}`` (``ufm.payloads.versioning``)."""

    def get(self, request):
        return Response(payloads.versioning(self.fabric()))


class EventsView(UfmView):
    """``GET /app/events`` (filters ``severity``, ``object_name``, ``type``, ``category``): the
    newest events, UFM's event objects (UFM REST API guide, "Events REST API")."""

    def get(self, request):
        q = request.query_params
        return Response(
            payloads.events(
                self.fabric(),
                severity=q.get("severity"),
                object_name=q.get("object_name"),
                type_=q.get("type"),
                category=q.get("category"),
                user=request.user,
            )  # fmt: skip
        )


class EventView(UfmView):
    """``DELETE /app/events/<id>``: the event leaves the log (Admin; audited,
    ``events.services.delete_event``). 200 ``{"id", "code"}``; 404 for no such event of the
    served fabric; 409 while the alarm engine has not evaluated it. UFM SDK
    ``scripts/ufm_events/ufm_events.py --delete_event N`` (``DELETE app/events/N``, needs 200)."""

    def delete(self, request, event_id: str):
        try:
            return Response(delete_event(int(event_id), request.user, fabric=self.fabric()))
        except Event.DoesNotExist:
            raise UfmNotFound(f"event {event_id} is not found") from None
        except EventNotDeletable as exc:
            raise UfmRefused(str(exc)) from None


class AlarmsView(UfmView):
    """``GET /app/alarms``: the open alarms, UFM's alarm objects."""

    def get(self, request):
        return Response(payloads.alarms(self.fabric(), user=request.user))


class UnhealthyPortsView(UfmView):
    """``GET /app/unhealthy_ports``: the ports isolated through this API. ``PUT`` ``{"ports":
    ["<guid>_<port>"], "ports_policy": "UNHEALTHY"|"HEALTHY", "action": "isolate"}`` isolates or
    re-enables switch ports (``ufm.isolation``; Admin)."""

    def get(self, request):
        return Response(unhealthy_ports(self.fabric()))

    def put(self, request):
        req = inputs.parse_unhealthy_ports(self.body())
        return Response(set_port_health(self.fabric(topology=True), req, user=request.user))


class ActionsView(UfmView):
    """``POST /actions`` ``{"action": "mark_device_unhealthy"|"mark_device_healthy",
    "object_ids": [switch GUIDs], "object_type": "System", "identifier": "id", "params":
    {"action": "isolate", "device_policy": ...}}`` (Admin): isolates or re-enables whole switches
    (``ufm.isolation.set_device_health``) and answers as UFM does, 202 with ``Location:
    /ufmRest/jobs/<id>`` (the job is finished already). UFM SDK
    ``scripts/batch_isolate_devices/batch_isolate_devices.py`` (needs 202, splits ``Location``
    on ``/`` for the job id). Other UFM actions are a 400 naming ``action``."""

    def post(self, request):
        req = inputs.parse_device_action(self.body())
        job = set_device_health(self.fabric(topology=True), req, user=request.user)
        prefix = request.path.split("/actions")[0]
        response = Response({"job_id": str(job.pk), "status": job.status}, status=202)
        response["Location"] = f"{prefix}/jobs/{job.pk}"
        return response


class JobView(UfmView):
    """``GET /jobs/<id>``: a job of ``POST /actions`` (``ufm.isolation.job_payload``: ``Status``
    ``Completed`` or ``Completed With Errors``); 404 when there is none."""

    def get(self, request, job_id: str):
        job = UfmJob.objects.filter(pk=int(job_id)).first()
        if job is None:
            raise UfmNotFound(f"job {job_id} is not found")
        return Response(job_payload(job))


# -- resources -----------------------------------------------------------------------------------


class PortsView(UfmView):
    """``GET /resources/ports`` (``?sys_type=Computer|Switch``, ``?active=true`` (``false``: all
    ports, as UFM), ``?show_disabled=``, ``?system=<guid>``): a top-level array of port objects (``ufm.payloads.ports``).

    Volcano ``fetchUFMData`` decodes ``[]UFMInterface`` (``description``, ``tier`` as an int,
    ``system_name``, ``node_description``, ``peer_node_name``) from ``GET
    /ufmRest/resources/ports`` with Basic auth and drops the whole answer on a decode error;
    ``buildHyperNodes`` deletes every HyperNode it made when no row says ``Computer``, so a
    fabric not discovered yet is a 503 here, never ``[]``. Carbide ``list_port`` reads
    ``?sys_type=Computer`` as ``Vec<Port>`` (``guid``, ``name``, ``systemID``, ``lid`` int,
    ``dname``, ``system_name``, ``physical_state``, ``logical_state``: all required)."""

    def get(self, request):
        q = request.query_params
        node_type = None
        if q.get("sys_type"):
            node_type = payloads.SYS_TYPES.get(q["sys_type"].strip().lower())
            if node_type is None:
                raise UfmInputError("sys_type", f"{q['sys_type']!r} is not Computer, Switch or Router")
        # UFM: active=true lists the Active ports only; active=false is no filter (every port), as
        # the UFM SDK's scripts/ufm_ports/load_ports.py --active false expects. show_disabled is
        # read (a bad value is a 400) but changes nothing: Weft lists disabled ports always.
        active = True if q.get("active") and inputs.parse_bool(q["active"], "active") else None
        if q.get("show_disabled"):
            inputs.parse_bool(q["show_disabled"], "show_disabled")
        system = inputs.parse_guid(q["system"], "system") if q.get("system") else None
        fabric = self.fabric(topology=True)
        return Response(payloads.ports(fabric, node_type=node_type, active=active, system=system))


def _paging(request) -> tuple[int | None, int | None]:
    """``(page_number, rpp)`` of the query string (None when absent).

    Raises:
        UfmInputError: a value that is not a positive integer.
    """
    q = request.query_params
    return inputs.parse_positive(q.get("page_number"), "page_number"), inputs.parse_positive(
        q.get("rpp"), "rpp"
    )


class SystemsView(UfmView):
    """``GET /resources/systems`` (``?type=switch|host``; ``page_number``/``rpp`` give
    ``{"data": [...]}``): one object per switch and per host. UFM SDK ``get_systems``."""

    def get(self, request):
        kind = request.query_params.get("type")
        node_type = None
        if kind:
            node_type = {"switch": "switch", "host": "ca", "computer": "ca", "router": "router"}.get(
                kind.lower()
            )
            if node_type is None:
                raise UfmInputError("type", f"{kind!r} is not switch, host or router")
        paging = _paging(request)
        fabric = self.fabric(topology=True)
        return Response(payloads.page(payloads.systems(fabric, node_type=node_type), *paging))


class SystemView(UfmView):
    """``GET /resources/systems/<system>`` (``?type=`` as the list): the one system whose
    ``system_guid``/``guid`` (16 hex digits, ``0x`` optional) or name is ``system``, as a
    one-element list (UFM SDK ``scripts/ufm_devices/load_devices.py --system``); 404 when none."""

    def get(self, request, system: str):
        wanted = system.strip().lower().removeprefix("0x")
        fabric = self.fabric(topology=True)
        found = [
            s for s in payloads.systems(fabric)
            if wanted in (s["system_guid"].lower(), s["guid"].lower()) or system.strip() == s["name"]
        ]  # fmt: skip
        if not found:
            raise UfmNotFound(f"system {system} is not found")
        return Response(found)


class LinksView(UfmView):
    """``GET /resources/links``: the cables; UFM SDK ``get_links`` asks
    ``?page_number=1&rpp=1000000000`` and reads ``["data"]``."""

    def get(self, request):
        paging = _paging(request)
        fabric = self.fabric(topology=True)
        return Response(payloads.page(payloads.links(fabric), *paging))


class PKeysView(UfmView):
    """``GET /resources/pkeys`` (``?guids_data=true``, ``?qos_conf=true``): every PKey, keyed
    ``"0x5"``. ``POST`` and ``PUT`` ``{pkey, guids, membership | memberships, index0,
    ip_over_ib}`` add GUIDs (the PKey is created when missing).

    ib-kubernetes: ``AddGuidsToPKey`` posts ``{"pkey": "0x%04X", "index0": true, "ip_over_ib":
    true, "membership": "full", "guids": [...]}`` and needs exactly 200; ``ListGuidsInUse`` reads
    ``GET /ufmRest/resources/pkeys/?guids_data=true`` (trailing slash) as ``map[string]{guids:
    [{guid}]}`` with GUIDs of 16 hex digits. Carbide: ``bind_ports`` posts ``{pkey, ip_over_ib,
    membership, index0, guids}``; ``list_partitions`` reads ``?guids_data=true`` or
    ``?qos_conf=true`` as ``HashMap<String, {partition, ip_over_ib, qos_conf?, guids, membership?}>``
    and parses each key as ``0x`` hex. UFM SDK ``set_pkey``: ``PUT`` with ``memberships`` or
    ``membership``; ``get_pkeys``: ``?guids_data=true``."""

    change = "pkeys"

    def get(self, request):
        guids_data, qos_conf = _flag(request, "guids_data"), _flag(request, "qos_conf")
        return Response(payloads.pkeys(self.fabric(), guids_data=guids_data, qos_conf=qos_conf))

    def post(self, request):
        req = inputs.parse_add_guids(self.body())
        return Response(services.add_guids(self.fabric(), req, user=request.user))

    put = post


class PKeyAddView(UfmView):
    """``POST /resources/pkeys/add`` ``{pkey, partition_name, index0, ip_over_ib, mtu_limit,
    service_level, rate_limit}``: a PKey without members (UFM REST API guide; 400 when it
    exists)."""

    change = "pkeys"

    def post(self, request):
        req = inputs.parse_empty_pkey(self.body())
        return Response(services.add_empty(self.fabric(), req, user=request.user))


class PKeyQosView(UfmView):
    """``PUT /resources/pkeys/qos_conf`` ``{pkey, mtu_limit, service_level, rate_limit}``:
    Carbide ``update_partition_qos`` (``mtu_limit`` 2 or 4, ``rate_limit`` Gb/s, 2.5 for SDR)."""

    change = "pkeys"

    def put(self, request):
        req = inputs.parse_qos_update(self.body())
        return Response(services.update_qos(self.fabric(), req, user=request.user))


class PKeyHostsView(UfmView):
    """``POST /resources/pkeys/hosts`` ``{"hosts_names": "node[01-04]", "pkey", "ip_over_ib",
    "index0"}``: the UFM Slurm plugin's prolog (``_add_hosts_to_pkey``; the host list is
    ``SLURM_JOB_NODELIST`` unexpanded, booleans may be strings from its configuration file)."""

    change = "pkeys"

    def post(self, request):
        req = inputs.parse_add_hosts(self.body())
        return Response(services.add_hosts(self.fabric(topology=True), req, user=request.user))


class PKeyView(UfmView):
    """``GET /resources/pkeys/<pkey>`` (``?guids_data=true&qos_conf=true``): one PKey, ``{}``
    when there is none (UFM's 200; Carbide ``get_partition`` reads ``{}`` as not found).
    ``DELETE``: the PKey goes (404 when missing, 409 for a pool's PKey or the default one).
    UFM SDK ``get_pkey``/``delete_pkey``; Carbide ``get_partition``."""

    change = "pkeys"

    def get(self, request, pkey: str):
        value = inputs.parse_pkey(pkey, "pkey", allow_default=True)
        guids_data, qos_conf = _flag(request, "guids_data"), _flag(request, "qos_conf")
        return Response(payloads.pkey(self.fabric(), value, guids_data=guids_data, qos_conf=qos_conf))

    def delete(self, request, pkey: str):
        value = inputs.parse_pkey(pkey, "pkey", allow_default=True)
        if value == 0x7FFF:
            raise UfmRefused("the default partition (0x7fff) cannot be deleted")
        return Response(services.delete_pkey(self.fabric(), value, user=request.user))


class PKeyHostsDeleteView(UfmView):
    """``DELETE /resources/pkeys/<pkey>/hosts/<hostlist>``: the UFM Slurm plugin's epilog
    (``_remove_hosts_from_pkey``, the host list unexpanded in the path)."""

    change = "pkeys"

    def delete(self, request, pkey: str, hosts: str):
        value = inputs.parse_pkey(pkey, "pkey")
        return Response(services.remove_hosts(self.fabric(topology=True), value, hosts, user=request.user))


class RemoveGuidsView(UfmView):
    """``POST /actions/remove_guids_from_pkey`` ``{pkey, guids}``: ib-kubernetes
    ``RemoveGuidsFromPKey`` (exactly 200), Carbide ``unbind_ports``. A pool's members stay."""

    change = "pkeys"

    def post(self, request):
        req = inputs.parse_remove_guids(self.body())
        return Response(services.remove_guids(self.fabric(), req, user=request.user))


# -- /dologin (ufmRestV2 sessions) ---------------------------------------------------------------


@csrf_exempt
@require_POST
def dologin(request):
    """``POST /dologin`` with form fields ``httpd_username``, ``httpd_password``: a session for
    ``/ufmRestV2/...`` (UFM's login form). Throttled by django-axes like every sign-in; 200
    ``{"username"}`` and the ``sessionid`` and ``csrftoken`` cookies (changes under
    ``/ufmRestV2`` send the CSRF token back as ``X-CSRFToken``), 401 for wrong credentials.
    Not CSRF-checked itself: it signs in, it acts on no session."""
    username = request.POST.get("httpd_username", "")
    password = request.POST.get("httpd_password", "")
    user = authenticate(request, username=username, password=password) if username else None
    if getattr(request, "axes_locked_out", False):
        return lockout_response(request)
    if user is None or not user.is_active:
        return JsonResponse({"error": "Invalid user name or password."}, status=401)
    login(request, user)
    get_token(request)
    return JsonResponse({"username": user.get_username()})
