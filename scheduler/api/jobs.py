"""The job queue's API (``/api/scheduler/jobs/``, ``decisions/``, ``queue/``): thin views over
``scheduler.services.queue``, tenant-scoped as the pools API (``pools.access``): everyone sees the
jobs of the tenants they belong to (Admins: all), another tenant's job is a 404; submitting,
cancelling, starting and finishing need the site Operator role and an operator membership of
the job's tenant. ``rebalance/`` runs the rebalancer (site Operator: it acts across tenants)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics, mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from accounts.roles import Role, has_role
from core.api.views import BRIEF_PARAM, BriefModeMixin
from pools import access
from pools.models import Pool

from .. import filtersets
from ..access import scope_jobs, submit_tenant
from ..models import Job, JobDecision
from ..services import fabric_view, faults, joblinks, queue, rebalance
from . import serializers


def _refusal(exc: queue.JobError) -> Response:
    return Response(exc.as_dict(), status=exc.status)


def _invalid(exc: queue.InvalidJob) -> ValidationError:
    return ValidationError({exc.field or "non_field_errors": [str(exc)]})


_WRITE_REFUSALS = {
    403: OpenApiResponse(description="not an operator of the job's tenant"),
    409: OpenApiResponse(serializers.JobErrorSerializer, description="the job's state does not allow it"),
}

_BRIEF = extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)


@_BRIEF
class JobViewSet(BriefModeMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs of the caller's tenants: submit (``POST``), read, and the state machine's actions."""

    queryset = Job.objects.select_related("tenant", "pool", "owner", "allocation")
    serializer_class = serializers.JobSerializer
    filterset_class = filtersets.JobFilterSet
    ordering_fields = ["id", "submitted_at", "placed_at", "priority", "state", "count"]
    lookup_value_regex = r"\d+"
    read_role = Role.VIEWER
    write_role = Role.OPERATOR

    def get_queryset(self):
        return scope_jobs(super().get_queryset(), self.request.user)

    def _answer(self, job: Job, code: int = 200) -> Response:
        job = self.queryset.get(pk=job.pk)
        return Response(serializers.JobSerializer(job, context={"request": self.request}).data, status=code)

    def _operate(self, tenant_id: int) -> None:
        if not access.can_operate(self.request.user, tenant_id):
            raise PermissionDenied("this needs an operator membership of the job's tenant")

    @extend_schema(
        request=serializers.SubmitJobSerializer,
        parameters=[
            OpenApiParameter(
                queue.IDEMPOTENCY_FIELD,
                str,
                OpenApiParameter.HEADER,
                required=False,
                description="a key of the client's (1-255 visible ASCII characters, a UUID say), unique per "
                "user: a submit retried with the same key and the same request answers 200 with the job the "
                "first one queued (header Idempotent-Replayed: true) instead of queueing another; the same "
                "key with another request is a 409",
            )
        ],  # fmt: skip
        responses={
            201: serializers.JobSerializer,
            200: OpenApiResponse(serializers.JobSerializer, description="a retry: the job the key queued"),
            400: OpenApiResponse(
                OpenApiTypes.OBJECT, description="{field: [message]}: the field that is wrong"
            ),
            403: OpenApiResponse(description="not an operator of the tenant"),
            409: OpenApiResponse(
                serializers.JobErrorSerializer,
                description="code idempotency_key_reused: the key was used for another request (job: its id)",
            ),
        },
        summary="Submit a job (Operator of the tenant): pending until a scheduling pass places it",
    )
    def create(self, request):
        body = serializers.SubmitJobSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        v = body.validated_data
        pool = access.scope_pools(Pool.objects.all(), request.user).filter(pk=v["pool"]).first()
        if pool is None:
            raise ValidationError({"pool": [f"no pool {v['pool']}"]})
        try:
            tenant_id = submit_tenant(request.user, pool, v["tenant"])
        except queue.InvalidJob as exc:
            raise _invalid(exc) from None
        except DjangoPermissionDenied as exc:
            raise PermissionDenied(str(exc)) from None
        spec = queue.JobSpec(
            name=v["name"], pool_id=pool.pk, tenant_id=tenant_id, kind=v["kind"], count=v["count"],
            gpu_model=v["gpu_model"], mig_profile=v["mig_profile"], memory_mib=v["memory_mib"],
            compute_pct=v["compute_pct"], gpus_per_host=v["gpus_per_host"], segments=v["segments"],
            segment_hosts=v["segment_hosts"], segment_tier=v["segment_tier"], priority_class=v["priority_class"],
            preemptible=v["preemptible"], requeue=v["requeue"], tier=v["tier"], tier_mode=v["tier_mode"], time_limit_s=v["time_limit_s"],
            on_fault=v["on_fault"], traffic=v["traffic"], webhook_url=v["webhook_url"], webhook_secret=v["webhook_secret"],
        )  # fmt: skip
        key = request.headers.get(queue.IDEMPOTENCY_FIELD)
        created = True
        try:
            if key is None:
                job = queue.submit(spec, user=request.user)
            else:
                job, created = queue.submit_with_key(spec, key, user=request.user)
        except queue.InvalidJob as exc:
            raise _invalid(exc) from None
        except queue.IdempotencyConflict as exc:
            return _refusal(exc)
        except Pool.DoesNotExist:  # deleted since the lookup above
            raise ValidationError({"pool": [f"no pool {v['pool']}"]}) from None
        if not created:
            answer = self._answer(job, status.HTTP_200_OK)
            answer["Idempotent-Replayed"] = "true"
            return answer
        return self._answer(job, status.HTTP_201_CREATED)

    @extend_schema(
        request=serializers.CancelJobSerializer,
        responses={200: serializers.JobSerializer, **_WRITE_REFUSALS},
        summary="Cancel a job (Operator of its tenant): its GPUs, if any, are released",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        body = serializers.CancelJobSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        self._operate(job.tenant_id)
        try:
            job = queue.cancel(job.pk, user=request.user, reason=body.validated_data["reason"])
        except queue.JobError as exc:
            return _refusal(exc)
        return self._answer(job)

    @extend_schema(
        request=None,
        responses={200: serializers.JobSerializer, **_WRITE_REFUSALS},
        summary="A placed job is running (its prolog, or an Operator of its tenant)",
    )
    @action(detail=True, methods=["post"])
    def start(self, request, pk=None):
        job = self.get_object()
        self._operate(job.tenant_id)
        try:
            job = queue.start(job.pk, user=request.user)
        except queue.JobError as exc:
            return _refusal(exc)
        return self._answer(job)

    @extend_schema(
        request=serializers.FinishJobSerializer,
        responses={200: serializers.JobSerializer, **_WRITE_REFUSALS},
        summary="A placed or running job ended, completed or failed: its GPUs are released",
    )
    @action(detail=True, methods=["post"])
    def finish(self, request, pk=None):
        job = self.get_object()
        body = serializers.FinishJobSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        self._operate(job.tenant_id)
        v = body.validated_data
        try:
            job = queue.finish(job.pk, ok=v["ok"], reason=v["reason"], user=request.user)
        except queue.JobError as exc:
            return _refusal(exc)
        return self._answer(job)

    @extend_schema(
        request=None,
        responses={200: serializers.JobSerializer, **_WRITE_REFUSALS},
        summary="Replace a degraded job's failed hosts by healthy ones of the same unit (site Operator)",
    )
    @action(detail=True, methods=["post"])
    def replace(self, request, pk=None):
        """The admin's option the rebalancer's dry run proposes for a degraded ``notify`` job (any
        ``on_fault``): each host that lost its fabric is swapped for a healthy host of the same
        placement unit with the GPUs, by the scheduler's own replacement
        (``faults.replace_now``). 409 when the job is not degraded by such a host, no host has the
        GPUs, or a pass holds the lock. It moves GPUs across the pool: the site Operator role."""
        job = self.get_object()
        if not has_role(request.user, Role.OPERATOR):
            raise PermissionDenied("replacing a job's hosts needs the site Operator role")
        try:
            job = faults.replace_now(job.pk, user=request.user)
        except queue.JobError as exc:
            return _refusal(exc)
        return self._answer(job)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "series", str, enum=["links", "totals"], required=False,
                description="links (default): every link's time series; totals: the links' summaries "
                "and the totals' series only (what the job page draws: a fraction of the size)",
            ),
            OpenApiParameter(
                "resolution", str, enum=list(fabric_view.RESOLUTIONS), required=False,
                description=f"auto (default): at most {fabric_view.MAX_STEPS} time steps whatever the job's "
                "age: the finest stored resolution with at most that many steps in the job's window (raw "
                "sweeps, per-minute or per-hour rollups), else the finest stored one put in that many bins "
                "(mean of the rates, highest utilisation and congestion, errors summed); raw, minute, "
                "hour: that stored resolution, every step (a long job's raw or per-minute read is large "
                "and slow). The answer's resolution says what was read",
            ),
        ],
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT, description="scheduler.services.fabric_view.job_fabric_view"
            ),
            400: OpenApiResponse(
                OpenApiTypes.OBJECT, description="{series|resolution: [message]}: an unknown value"
            ),
        },
        summary="The job's fabric view: its hosts, the traffic, utilisation, congestion and errors of its "
        "HCA links and its units' uplinks over its lifetime, and the alarms that touched them",
    )  # fmt: skip
    @action(detail=True, methods=["get"])
    def fabric(self, request, pk=None):
        """``job_fabric_view`` of a job the caller may read (another tenant's job: 404); 400 for
        an unknown ``series`` or ``resolution``."""
        series = request.query_params.get("series") or "links"
        if series not in ("links", "totals"):
            raise ValidationError({"series": [f"unknown {series!r}: use links or totals"]})
        resolution = request.query_params.get("resolution") or "auto"
        if resolution not in fabric_view.RESOLUTIONS:
            raise ValidationError(
                {"resolution": [f"unknown {resolution!r}: use {', '.join(fabric_view.RESOLUTIONS)}"]}
            )
        return Response(fabric_view.job_fabric_view(self.get_object(), series=series, resolution=resolution))

    @extend_schema(
        responses={200: OpenApiTypes.OBJECT},
        summary="The links the job's traffic crosses (its routed paths under its traffic model), with "
        "their live utilisation and congestion",
    )
    @action(detail=True, methods=["get"])
    def links(self, request, pk=None):
        """``{"traffic", "links": joblinks.links_of(job)}`` of a job the caller may read: every
        directed port its rails' pairs cross, the path count, rails, and telemetry's latest
        utilisation/congestion (0..1) of the port."""
        job = self.get_object()
        return Response({"job": job.pk, "traffic": job.traffic, "links": joblinks.links_of(job.pk)})


@extend_schema_view(
    list=extend_schema(parameters=[BRIEF_PARAM]), retrieve=extend_schema(parameters=[BRIEF_PARAM])
)
class JobDecisionViewSet(BriefModeMixin, viewsets.ReadOnlyModelViewSet):
    """Every job's decisions with their explanations, newest first (``?job=`` for one job's):
    placed (why these hosts), pending (quota, fragmentation, constraint, congestion, capacity,
    conflict), and the state changes. At most ``WEFT_SCHEDULER_DECISION_HISTORY`` per job."""

    queryset = JobDecision.objects.select_related("job")
    serializer_class = serializers.JobDecisionSerializer
    filterset_class = filtersets.JobDecisionFilterSet
    ordering_fields = ["id", "at", "last_at", "count"]
    lookup_value_regex = r"\d+"
    read_role = Role.VIEWER

    def get_queryset(self):
        return scope_jobs(super().get_queryset(), self.request.user, "job__tenant")


@extend_schema(
    parameters=[
        OpenApiParameter("tenant", OpenApiTypes.INT, description="only this tenant's jobs"),
        OpenApiParameter("pool", OpenApiTypes.INT, description="only this pool's jobs"),
    ],
    responses={200: serializers.QueueEntrySerializer(many=True)},
    summary="Pending jobs in the order the next scheduling pass considers them, with why they wait",
)
class QueueView(generics.GenericAPIView):
    """The queue (Viewer): the pending jobs of the caller's tenants in pass order — priority,
    then fair share across tenants (``scheduler.planner.fair_order``) — with their pending code,
    reasons and reservation. ``position`` counts every tenant's pending jobs."""

    read_role = Role.VIEWER
    serializer_class = serializers.QueueEntrySerializer
    filter_backends: list = []

    def get(self, request):
        params = request.query_params
        wanted = {}
        for name in ("tenant", "pool"):
            raw = params.get(name, "")
            if raw:
                if not (raw.isascii() and raw.isdigit() and len(raw) < 18):
                    raise ValidationError({name: ["an id (a positive integer)"]})
                wanted[f"{name}_id"] = int(raw)
        visible = set(
            scope_jobs(Job.objects.filter(state="pending"), request.user).values_list("pk", flat=True)
        )
        rows = []
        for pos, job in enumerate(queue.queue_order()):
            if job.pk not in visible or any(getattr(job, k) != v for k, v in wanted.items()):
                continue
            d = job.decision or {}
            rows.append({
                "position": pos, "job": job, "tenant": job.tenant, "pool": job.pool, "request": queue.describe(job),
                "priority_class": job.priority_class, "priority": job.priority, "submitted_at": job.submitted_at,
                "decided_at": job.decided_at, "pending_code": job.pending_code,
                "reasons": list(d.get("reasons") or ([job.reason] if job.reason else [])),
                "reserved_start": job.reserved_start, "reserved_hosts": list(job.reserved_hosts or []),
            })  # fmt: skip
        page = self.paginate_queryset(rows)
        data = self.get_serializer(page, many=True, context={"request": request}).data
        return self.get_paginated_response(data)


@extend_schema(
    request=serializers.RebalanceRequestSerializer,
    responses={
        200: serializers.RebalanceResultSerializer,
        403: OpenApiResponse(description="Viewers may not run the rebalancer"),
        409: OpenApiResponse(
            OpenApiTypes.OBJECT, description="a scheduling pass holds the lock: nothing done"
        ),
    },
    summary="Run the rebalancer (Operator): reclaim borrowed GPUs, defragmenting moves, congestion reports",
)
class RebalanceView(generics.GenericAPIView):
    """``POST {"dry_run": true|false}`` (Operator and Admin; default a dry run): the rebalancer's
    actions (``scheduler.services.rebalance``), each with its reason and, for a real run, its
    outcome. A dry run lists the same actions a real run on the same state takes. A real run
    while a pass holds the lock is a 409 and does nothing. It acts across tenants: the site
    Operator role is what it needs, as draining a fabric."""

    read_role = Role.OPERATOR
    write_role = Role.OPERATOR
    serializer_class = serializers.RebalanceRequestSerializer
    filter_backends: list = []

    def post(self, request):
        body = serializers.RebalanceRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = rebalance.run_rebalance(dry_run=body.validated_data["dry_run"], user=request.user)
        if result.get("skipped"):
            return Response(result, status=status.HTTP_409_CONFLICT)
        return Response(result)
