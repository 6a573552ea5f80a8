"""Users and roles, their API tokens, and the audit log in the UI (Admin only): the pages an Admin
uses instead of the Django admin. Every change goes through ``accounts.services`` (guards and
audit entries as the API's)."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.mixins import LoginRequiredMixin
from django.contrib.auth.views import LoginView
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from core.converters import RowIdConverter
from core.validators import printable_text

from . import services
from .api.serializers import UserSerializer
from .directory import problems_of
from .models import ApiToken, AuditEntry
from .roles import Role, has_role, role_of
from .sign_in import sign_in_context

ROLE_CHOICES = [("viewer", "Viewer"), ("operator", "Operator"), ("admin", "Admin")]


class SignInView(LoginView):
    """The sign-in page: Django's, with why a directory sign-in did not happen (the directory
    down, no Weft group: ``accounts.directory.note_problem``) and the "Sign in with <provider>"
    link when OpenID Connect is configured."""

    template_name = "accounts/login.html"

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(sign_in_context(self.request))
        context["directory_problems"] = problems_of(self.request)
        return context


class AdminRequiredMixin(LoginRequiredMixin):
    """Signed-in Admins only (anonymous: to the sign-in page; other roles: 403)."""

    def dispatch(self, request, *args, **kwargs):
        if request.user.is_authenticated and not has_role(request.user, Role.ADMIN):
            raise PermissionDenied("This page needs the admin role.")
        return super().dispatch(request, *args, **kwargs)


def _errors(serializer) -> list[str]:
    """A serializer's errors as lines ``field: message`` for the page."""
    out = []
    for field, problems in serializer.errors.items():
        for problem in problems if isinstance(problems, list) else [problems]:
            out.append(f"{field}: {problem}" if field != "non_field_errors" else str(problem))
    return out


class UserListView(AdminRequiredMixin, View):
    """``GET``: every user with role, state, last sign-in and token count; ``POST``: create one
    (user name, e-mail, password, role; the API's validation)."""

    template_name = "accounts/user_list.html"

    def _render(self, request, status=200, errors=(), form=None):
        users = (
            get_user_model()
            .objects.order_by("username")
            .select_related("directory_account")
            .annotate(n_tokens=Count("api_tokens"))
        )
        rows = [{"user": u, "role": role_of(u).name.lower() if u.is_active else "inactive"} for u in users]
        ctx = {"rows": rows, "roles": ROLE_CHOICES, "errors": errors, "form": form or {"role": "viewer"}}
        return render(request, self.template_name, ctx, status=status)

    def get(self, request):
        return self._render(request)

    def post(self, request):
        data = {k: request.POST.get(k, "") for k in ("username", "email", "password", "role")}
        if not data["password"]:
            data.pop("password")  # no password: the user cannot sign in until one is set
        serializer = UserSerializer(data=data)
        if not serializer.is_valid():
            return self._render(request, 400, _errors(serializer), form=data)
        user = services.create_user(serializer)
        messages.success(request, f"User {user.username} created ({data['role']}).")
        return redirect("accounts:user", pk=user.pk)


class UserView(AdminRequiredMixin, View):
    """One user: role and e-mail, activate/deactivate, a new password, API tokens (issue: the
    key is shown once; revoke). ``POST op=`` ``update``, ``activate``, ``deactivate``,
    ``password``, ``issue_token``, ``revoke_token`` (``token``)."""

    template_name = "accounts/user.html"

    def _render(self, request, user, status=200, errors=(), key=None):
        ctx = {
            "subject": user,
            "role": role_of(user).name.lower() if user.is_active else "inactive",
            "roles": ROLE_CHOICES,
            "tokens": ApiToken.objects.filter(user=user).order_by("-created"),
            "errors": errors,
            "new_key": key,
            "audit": AuditEntry.objects.filter(object_type=user._meta.label_lower, object_id=str(user.pk))[
                :20
            ],
        }
        return render(request, self.template_name, ctx, status=status)

    def get(self, request, pk: int):
        return self._render(request, get_object_or_404(get_user_model(), pk=pk))

    def post(self, request, pk: int):
        user = get_object_or_404(get_user_model(), pk=pk)
        op = request.POST.get("op", "")
        if op in ("update", "activate", "deactivate", "password"):
            if op == "update":
                data = {"role": request.POST.get("role", ""), "email": request.POST.get("email", "")}
            elif op == "password":
                data = {"password": request.POST.get("password", "")}
            else:
                data = {"is_active": op == "activate"}
            serializer = UserSerializer(user, data=data, partial=True)
            if not serializer.is_valid():
                return self._render(request, user, 400, _errors(serializer))
            services.update_user(request.user, serializer)  # PermissionDenied: the styled 403
            messages.success(
                request, f"{user.username}: {'password changed' if op == 'password' else op + 'd'}."
            )
        elif op == "issue_token":
            name = request.POST.get("name", "").strip()
            limit = ApiToken._meta.get_field("name").max_length
            if len(name) > limit:
                return self._render(request, user, 400, [f"name: at most {limit} characters"])
            try:
                printable_text(name)  # a NUL, a newline, a right-to-left override…
            except ValidationError as exc:
                return self._render(request, user, 400, [f"name: {m}" for m in exc.messages])
            issued = services.issue_token_for(request.user, user, name)
            return self._render(request, user, key=issued.key)
        elif op == "revoke_token":
            token_id = request.POST.get("token", "")
            if not re.fullmatch(RowIdConverter.regex, token_id):
                return self._render(request, user, 400, [f"token: a token id expected, not {token_id!r}"])
            token = get_object_or_404(ApiToken, pk=int(token_id), user=user)
            services.revoke_token_by(request.user, token)
            messages.success(request, f"Token {token.prefix}… of {user.username} revoked.")
        else:
            return self._render(request, user, 400, [f"unknown operation {op!r}"])
        return redirect("accounts:user", pk=user.pk)


class AuditLogView(AdminRequiredMixin, View):
    """The audit log, newest first, 100 a page; filters ``action`` (prefix, e.g. ``user.``),
    ``username``, ``object_type`` (``app.model``)."""

    template_name = "accounts/audit_log.html"
    PAGE = 100

    def get(self, request):
        entries = AuditEntry.objects.all()
        action = request.GET.get("action", "").strip()
        username = request.GET.get("username", "").strip()
        object_type = request.GET.get("object_type", "").strip()
        for field, value in (("action", action), ("username", username), ("object_type", object_type)):
            if "\x00" in value:  # PostgreSQL refuses it in a text parameter (DataError: a 500)
                return HttpResponseBadRequest(f"{field}: no NUL character in a filter")
        if action:
            entries = entries.filter(action__startswith=action)
        if username:
            entries = entries.filter(username=username)
        if object_type:
            entries = entries.filter(object_type=object_type)
        page = Paginator(entries.order_by("-at", "-id"), self.PAGE).get_page(request.GET.get("page"))
        query = request.GET.copy()
        query.pop("page", None)
        ctx = {
            "page": page,
            "filters": {"action": action, "username": username, "object_type": object_type},
            "query": query.urlencode(),
        }
        return render(request, self.template_name, ctx)
