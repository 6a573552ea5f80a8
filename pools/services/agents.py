"""Which hosts a host agent may report for: API tokens bound to hosts (:class:`~pools.models.AgentBinding`).

A host report rewrites a host's GPU inventory, so a stolen agent token must not rewrite every
host's. The rules (``POST /api/pools/agent/``, after the host is resolved from the report):

* a token bound to hosts reports for those hosts only; a report for another host is refused
  (:class:`AgentRefused`, 403, naming the bound hosts), whoever owns the token;
* an unbound token of a **host agent** (a user posting through the "Host agent" group, without
  the Operator role) is bound to the host of its first accepted report, in the report's
  transaction (``agent.bind`` audited, ``via`` ``first_report``): trust on first use, so a fleet
  is rolled out with one token per host and no Admin step per host. With
  ``WEFT_AGENT_BIND_ON_FIRST_REPORT`` off, an unbound agent token is refused until an Admin binds
  it. One token shared by several hosts stops working after the first report: give each host
  its own token (or an Admin binds the shared one to each host);
* an unbound token of an Operator or Admin is not restricted (a person posting a report by hand,
  as ``manage.py import_gpus`` may); an Admin binds it to restrict it;
* a host agent signed in without a token (a session) is refused: agents report with a token.

Admins list tokens with their hosts and set them (``/api/pools/agent-tokens/``,
:func:`set_bindings`: the whole list, ``[]`` unbinds; audited ``agent.hosts``). Only a superuser
changes a superuser's token's hosts (``accounts.guards.check_token_revocation``). Each write is one
transaction holding the token's row (``select_for_update``), so two first reports of one token
for two hosts cannot both bind it.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

from accounts import audit
from accounts.models import ApiToken
from accounts.roles import Role, has_role
from fabric.models import Host

from ..choices import BindingVia
from ..models import AgentBinding


class AgentRefused(Exception):
    """This request may not report for this host (HTTP 403; ``str`` says why and what to do)."""


def _names(hosts: Iterable[Host]) -> list[str]:
    return sorted(f"{h.name} ({h.fabric.name})" for h in hosts)


def _bound_hosts(token: ApiToken) -> list[Host]:
    return [b.host for b in AgentBinding.objects.filter(token=token).select_related("host__fabric")]


def check_report(user, token: ApiToken | None, host: Host) -> bool:
    """May ``user`` (authenticated with ``token``, None for a session) report for ``host``?
    Returns True when the report, once accepted, binds the token (:func:`bind_first_report`),
    False when nothing is to bind.

    Raises:
        AgentRefused: a token bound to other hosts, an unbound agent token while binding on first
            report is off, or a host agent without a token.
    """
    if token is None:
        if has_role(user, Role.OPERATOR):
            return False
        raise AgentRefused(
            "a host agent reports with an API token (Authorization: Token <key>), not a session"
        )
    bound = _bound_hosts(token)
    if bound:
        if host.pk in {h.pk for h in bound}:
            return False
        raise AgentRefused(
            f"this agent token ({token.prefix}…) is bound to {', '.join(_names(bound))}: it may not report for "
            f"{host.name} ({host.fabric.name}); an Admin changes its hosts at /api/pools/agent-tokens/{token.pk}/"
        )
    if has_role(user, Role.OPERATOR):
        return False
    if not settings.WEFT_AGENT_BIND_ON_FIRST_REPORT:
        raise AgentRefused(
            f"this agent token ({token.prefix}…) is bound to no host: an Admin binds it first "
            f'(PATCH /api/pools/agent-tokens/{token.pk}/ {{"hosts": [host ids]}})'
        )
    return True


def bind_first_report(token: ApiToken, host: Host, *, user=None) -> None:
    """Bind ``token`` to ``host``, the host of its first accepted report, inside the caller's
    transaction (the report's), holding the token's row; audited ``agent.bind``.

    Raises:
        AgentRefused: another report of this token bound it to another host meanwhile.
    """
    with transaction.atomic():
        ApiToken.objects.select_for_update().filter(pk=token.pk).first()
        bound = _bound_hosts(token)
        if any(h.pk == host.pk for h in bound):
            return
        if bound:
            raise AgentRefused(
                f"this agent token ({token.prefix}…) was just bound to {', '.join(_names(bound))} by another report"
            )
        AgentBinding.objects.create(token=token, host=host, via=BindingVia.FIRST_REPORT)
        audit.record(
            "agent.bind", token,
            {"token": token.pk, "prefix": token.prefix, "hosts": _names([host]), "via": BindingVia.FIRST_REPORT},
            user=user,
        )  # fmt: skip


def set_bindings(token: ApiToken, hosts: Iterable[Host], *, user=None) -> dict[str, list[str]]:
    """Make ``hosts`` the hosts ``token`` may report for (replace; empty unbinds it), in one
    transaction holding the token's row; audited as one ``agent.hosts`` entry (``hosts``: [before,
    after], ``bound``, ``unbound``) when anything changed. Returns ``{"bound": [names],
    "unbound": [names]}`` (``"name (fabric)"``) of the change."""
    wanted = {h.pk: h for h in hosts}
    with transaction.atomic():
        ApiToken.objects.select_for_update().filter(pk=token.pk).first()
        current = {
            b.host_id: b for b in AgentBinding.objects.filter(token=token).select_related("host__fabric")
        }
        added = [pk for pk in wanted if pk not in current]
        removed = [b for pk, b in current.items() if pk not in wanted]
        AgentBinding.objects.bulk_create(
            [AgentBinding(token=token, host_id=pk, via=BindingVia.ADMIN) for pk in added]
        )
        AgentBinding.objects.filter(pk__in=[b.pk for b in removed]).delete()
        change = {"bound": _names(Host.objects.select_related("fabric").filter(pk__in=added)),
                  "unbound": _names(b.host for b in removed)}  # fmt: skip
        if added or removed:
            before = _names(b.host for b in current.values())
            after = _names(Host.objects.select_related("fabric").filter(pk__in=list(wanted)))
            audit.record(
                "agent.hosts", token,
                {"token": token.pk, "prefix": token.prefix, "owner": token.user.username, "hosts": [before, after],
                 **change},
                user=user,
            )  # fmt: skip
    return change
