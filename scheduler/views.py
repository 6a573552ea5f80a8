"""Scheduler pages (namespace ``scheduler``): the queue, a job, submit and cancel, and the dry run
("where would this job go?").

Tenant-scoped as the API (``scheduler.access``, ``pools.access``): everyone sees the jobs of the
tenants they belong to (Admins: all), another tenant's job is a 404; submitting and cancelling
need the site Operator role and an operator membership of the job's tenant (the buttons show only
then). The pages read through the queue's services (``queue_order``, ``describe``), the fabric
view (``scheduler.services.fabric_view``) and the dry run (``scheduler.services.whatif``); writes
go through ``scheduler.services.queue`` (``submit``, ``cancel``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone
from django.views import View
from django.views.generic import TemplateView

from accounts.roles import Role
from core.params import int_param
from fabric.views import RoleRequiredMixin
from pools import access
from pools.models import Pool

from .access import scope_jobs, submit_tenant
from .choices import FINAL, HOLDING, JobState
from .forms import JobForm
from .models import Job
from .services import queue
from .services.fabric_view import job_fabric_hosts
from .services.timeline import job_allocations, job_timeline
from .services.whatif import dry_run

#: ended jobs listed on the queue page
ENDED_SHOWN = 25
#: uplinks listed on a job page (the worst of its leaves'; static/scheduler/job.js draws the
#: table); the chart and the JSON have them all
MAX_UPLINK_ROWS = 12
#: leaves linked to the ports view under the table (the first by name)
MAX_LEAF_LINKS = 8


def highlight_label(name: str, hosts: int) -> str:
    """The map legend's label of a job's or pool's marked nodes: the map counts the marked HCAs
    after it (``HCAs of llm on 1 host (8)``), so the label says how many hosts they are on."""
    return f"HCAs of {name} on {hosts} host{'' if hosts == 1 else 's'}"


#: the dry run the queue page's button asks for (issue 12, Demo: "place a 64-GPU job")
DEMO_DRY_RUN = {"name": "what-if-64", "count": 64, "gpus_per_host": 8, "priority_class": "normal"}


def _wait(job: Job, now) -> timedelta:
    """How long the job waited (pending: so far)."""
    until = job.placed_at or (now if job.state == JobState.PENDING else job.ended_at or now)
    return max(until - job.submitted_at, timedelta(0))


def duration_text(seconds: float) -> str:
    """``"45 s"``, ``"12 min 5 s"``, ``"3 h 20 min"``, ``"2 d 4 h"``."""
    s = int(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def _form_context(user, data=None, initial=None) -> JobForm:
    pools = access.scope_pools(Pool.objects.select_related("tenant"), user).order_by("name").distinct()
    tenants = access.visible_tenants(user).order_by("name")
    return JobForm(data, pools=pools, tenants=tenants, initial=initial)


class QueueView(RoleRequiredMixin, TemplateView):
    """The queue: pending jobs in the order the next pass considers them, then the placed and
    running ones, then the latest ended; ``?state=`` (a state, ``active`` or ``ended``) and
    ``?tenant=<id>`` filter. The submit form for Operators, and the dry-run button."""

    template_name = "scheduler/queue.html"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        user, now = self.request.user, timezone.now()
        want_state = self.request.GET.get("state", "")
        tenants = list(access.visible_tenants(user).order_by("name"))
        tenant_id = int_param(self.request.GET.get("tenant"))
        if tenant_id is not None and tenant_id not in {t.pk for t in tenants}:
            tenant_id = None
        visible = scope_jobs(Job.objects.all(), user)
        if tenant_id is not None:
            visible = visible.filter(tenant_id=tenant_id)
        operate = access.operator_tenant_ids(user)

        def row(job: Job, position: int | None = None) -> dict:
            d = job.decision or {}
            reasons = list(d.get("reasons") or []) if job.state == JobState.PENDING else []
            if job.state == JobState.PENDING and not reasons and job.reason:
                reasons = [job.reason]
            if job.state == JobState.DEGRADED:  # why: its fabric faults
                reasons = [f.get("message", "") for f in job.faults or []]
            return {
                "job": job, "position": position, "request": queue.describe(job), "reasons": reasons,
                "wait_s": int(_wait(job, now).total_seconds()),
                "wait_text": duration_text(_wait(job, now).total_seconds()), "hosts": sorted(job.placement or {}),
                "can_cancel": job.state not in FINAL and job.tenant_id in operate,
            }  # fmt: skip

        states = {s.value for s in JobState}
        show_pending = want_state in ("", "pending", "active")
        show_holding = want_state in ("", "placed", "running", "degraded", "active")
        show_ended = want_state in ("", "ended") or want_state in {s.value for s in FINAL}
        pending_ids = set(visible.filter(state=JobState.PENDING).values_list("pk", flat=True))
        ctx["pending"] = (
            [row(j, pos) for pos, j in enumerate(queue.queue_order(now)) if j.pk in pending_ids]
            if show_pending
            else []
        )
        holding = visible.filter(state__in=HOLDING).select_related("tenant", "pool", "owner")
        if want_state in ("placed", "running", "degraded"):
            holding = holding.filter(state=want_state)
        ctx["holding"] = [row(j) for j in holding.order_by("placed_at", "pk")] if show_holding else []
        ended = visible.filter(state__in=FINAL).select_related("tenant", "pool", "owner")
        if want_state in states and want_state in FINAL:
            ended = ended.filter(state=want_state)
        ctx["ended"] = (
            [row(j) for j in ended.order_by("-ended_at", "-pk")[:ENDED_SHOWN]] if show_ended else []
        )
        ctx.update(
            tenants=tenants, tenant_id=tenant_id, want_state=want_state,
            holding_empty=f"No {want_state} job." if want_state in HOLDING else "No job holds GPUs.",
            state_choices=["active", "pending", "placed", "running", "degraded", "ended", *[s.value for s in FINAL]],
            can_submit=bool(operate), form=_form_context(user) if operate else None,
            dry_run_url=f"{reverse('scheduler:dry_run')}?{urlencode(DEMO_DRY_RUN)}",
            submit_token=uuid.uuid4().hex,  # one per page shown: the submit's idempotency key
        )  # fmt: skip
        return ctx


class SubmitView(RoleRequiredMixin, View):
    """POST: submit the form's job (Operator of its tenant), then to its page."""

    required_role = Role.OPERATOR

    def post(self, request: HttpRequest) -> HttpResponse:
        form = _form_context(request.user, request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
            messages.error(request, f"Not submitted: {errors}")
            return redirect("scheduler:queue")
        spec = form.spec()
        pool = access.scope_pools(Pool.objects.all(), request.user).filter(pk=spec.pool_id).first()
        try:
            if pool is None:
                raise queue.InvalidJob(f"no pool {spec.pool_id}", field="pool")
            spec.tenant_id = submit_tenant(request.user, pool, spec.tenant_id)
            # the page's one-time token is the idempotency key: the form sent twice (a double
            # click, a reload re-posting it) queues one job
            token = request.POST.get("submit_token", "")
            if token:
                job, created = queue.submit_with_key(spec, f"page-{token}", user=request.user)
                if not created:
                    messages.info(request, f"{job} was already submitted from this form; not queued again.")
                    return redirect("scheduler:job", pk=job.pk)
            else:
                job = queue.submit(spec, user=request.user)
        except queue.IdempotencyConflict:
            messages.error(
                request, "Not submitted: this form was already used for another job; reload the page."
            )
            return redirect("scheduler:queue")
        except queue.InvalidJob as exc:
            messages.error(request, f"Not submitted: {exc.field or 'job'}: {exc}")
            return redirect("scheduler:queue")
        except PermissionDenied as exc:
            messages.error(request, f"Not submitted: {exc}")
            return redirect("scheduler:queue")
        messages.success(request, f"Submitted {job} ({queue.describe(job)}); the next pass places it.")
        return redirect("scheduler:job", pk=job.pk)


class CancelView(RoleRequiredMixin, View):
    """POST: cancel a job (Operator of its tenant); another tenant's job is a 404."""

    required_role = Role.OPERATOR

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        job = scope_jobs(Job.objects.all(), request.user).filter(pk=pk).first()
        if job is None:
            raise Http404("no such job")
        if not access.can_operate(request.user, job.tenant_id):
            raise PermissionDenied("cancelling needs an operator membership of the job's tenant")
        try:
            queue.cancel(job.pk, user=request.user, reason=f"cancelled by {request.user.username}")
        except queue.JobError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, f"{job} cancelled.")
        target = request.POST.get("next", "")
        return redirect(
            target if target in (reverse("scheduler:queue"), job_url(job.pk)) else job_url(job.pk)
        )


def job_url(pk: int) -> str:
    return reverse("scheduler:job", args=[pk])


class JobView(RoleRequiredMixin, TemplateView):
    """One job: its request, state timeline, decisions with their explanations, the GPUs it was
    given, and its fabric view (hosts on the map, link charts, alarms)."""

    template_name = "scheduler/job.html"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        user = self.request.user
        job = (
            scope_jobs(Job.objects.select_related("tenant", "pool", "owner", "allocation", "partition"), user)
            .filter(pk=kwargs["pk"])
            .first()
        )
        if job is None:
            raise Http404("no such job")
        # where it is and what it holds; its traffic, link table and alarms are fetched on demand
        # (job.js: the fabric view's API), so the page's size and time do not grow with its age
        view = job_fabric_hosts(job)
        window = view["window"]
        if window["start_epoch"] is not None:  # shown in the server's time zone, as the charts are
            ctx["window_start"] = datetime.fromtimestamp(window["start_epoch"], tz=UTC)
            ctx["window_end"] = datetime.fromtimestamp(window["end_epoch"], tz=UTC)
        ctx.update(
            job=job, ended=job.state in FINAL, request_text=queue.describe(job), timeline=job_timeline(job),
            decisions=list(job.decisions.order_by("-id")), allocations=job_allocations(job), view=view,
            can_cancel=job.state not in FINAL and access.can_operate(user, job.tenant_id),
            fabric_api=reverse("scheduler-api:job-fabric", args=[job.pk]),
            links_api=reverse("scheduler-api:job-links", args=[job.pk]),
            max_uplinks=MAX_UPLINK_ROWS, max_leaves=MAX_LEAF_LINKS,
        )  # fmt: skip
        if view["fabric"]:
            fid = view["fabric"]["id"]
            ctx["map_fabric"] = {"pk": fid, "name": view["fabric"]["name"]}
            ctx["map_url"] = reverse("fabric-api:fabric-map", args=[fid])
            ctx["highlight"] = " ".join(view["highlight"])
            marked = set(view["highlight"])
            ctx["highlight_label"] = highlight_label(
                job.name, sum(1 for h in view["hosts"] if marked.intersection(h.get("cas", [])))
            )
            if view["highlight"]:
                query = urlencode({"fabric": fid, "highlight": ",".join(view["highlight"])})
                ctx["map_page_url"] = f"{reverse('fabric:map')}?{query}"
        return ctx


class DryRunView(RoleRequiredMixin, TemplateView):
    """GET: where would a job go if submitted now (``scheduler.services.whatif.dry_run``)? The
    form's fields as query parameters; nothing is written, so a Viewer may ask too (the answer
    names hosts and reasons, as the map and the queue already show them)."""

    template_name = "scheduler/dry_run.html"

    def get_context_data(self, **kwargs):
        ctx = super().get_context_data(**kwargs)
        user = self.request.user
        params = self.request.GET.copy()
        form = _form_context(user, None, initial=DEMO_DRY_RUN)
        if "pool" not in params and form.fields["pool"].choices:
            params["pool"] = str(self._default_pool(form))
        for key, value in (
            ("name", DEMO_DRY_RUN["name"]),
            ("priority_class", "normal"),
            ("tier_mode", "preferred"),
        ):
            if not params.get(key):
                params[key] = value
        if params.get("count"):
            form = _form_context(user, params)
            if form.is_valid():
                spec = form.spec()
                pool = access.scope_pools(Pool.objects.all(), user).filter(pk=spec.pool_id).first()
                if spec.tenant_id is None and pool is not None and pool.tenant_id is None:
                    spec.tenant_id = (
                        access.visible_tenants(user).order_by("pk").values_list("pk", flat=True).first()
                    )
                try:
                    if pool is None:
                        raise queue.InvalidJob(f"no pool {spec.pool_id}", field="pool")
                    ctx["result"] = dry_run(spec)
                except queue.InvalidJob as exc:
                    ctx["error"] = f"{exc.field or 'job'}: {exc}"
        ctx["form"] = form
        return ctx

    @staticmethod
    def _default_pool(form: JobForm) -> int:
        """The largest pool by quota (the demo's research pool), else the first."""
        ids = [pk for pk, _ in form.fields["pool"].choices]
        quotas = dict(Pool.objects.filter(pk__in=ids).values_list("pk", "quota_gpus"))
        return max(ids, key=lambda pk: (quotas.get(pk) or 0, -pk))
