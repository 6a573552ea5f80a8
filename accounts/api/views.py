"""Users and roles, API tokens, and the audit log (``/api/accounts/``)."""

from __future__ import annotations

import base64
import binascii

from django.contrib.auth import authenticate, get_user_model
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import AuthenticationFailed, NotAuthenticated, ParseError
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from .. import services
from ..login_throttle import lockout_response
from ..models import ApiToken, AuditEntry
from ..roles import Role, has_role, role_of
from ..tokens import create_token
from .serializers import (
    ApiTokenSerializer,
    AuditEntrySerializer,
    TokenRequestSerializer,
    TokenResponseSerializer,
    UserSerializer,
)

#: The challenge of ``POST /api/accounts/users/token/`` when it answers 401: Basic (a user name and
#: password, what a script sends to get a token) or a token already issued (RFC 9110 §11.6.1).
TOKEN_CHALLENGE = 'Basic realm="api", Token realm="api"'


def basic_credentials(request) -> tuple[str, str] | None:
    """The user name and password of an ``Authorization: Basic`` header (RFC 7617, UTF-8), or
    None when the request has no Basic header.

    Raises:
        ParseError: a Basic header that is not base64 of ``user:password`` (400).
    """
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise ParseError("Authorization: Basic needs base64 of user:password (UTF-8).") from None
    username, sep, password = decoded.partition(":")
    if not sep or not username or "\x00" in decoded:
        raise ParseError("Authorization: Basic needs base64 of user:password (UTF-8).")
    return username, password


class UserViewSet(viewsets.ModelViewSet):
    """Users and their roles (Admin only). ``me`` returns the caller (any role); ``token`` issues
    an API token (see :meth:`token`).

    Only a superuser changes or deletes a superuser, and nobody changes their own role or active
    flag or deletes themselves (``accounts.guards``): 403, audited as ``user.change_refused``.
    """

    queryset = get_user_model().objects.order_by("username")
    serializer_class = UserSerializer
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    action_roles = {"me": Role.VIEWER}
    filterset_fields = ["username", "is_active"]

    def perform_create(self, serializer):
        services.create_user(serializer)

    def perform_update(self, serializer):
        services.update_user(self.request.user, serializer)

    def perform_destroy(self, instance):
        services.delete_user(self.request.user, instance)

    @action(detail=False, methods=["get"])
    def me(self, request):
        return Response(UserSerializer(request.user).data)

    @extend_schema(
        request=TokenRequestSerializer,
        responses={
            200: TokenResponseSerializer,
            400: OpenApiResponse(description="Bad parameters (a field, or a malformed Basic header)."),
            401: OpenApiResponse(
                description="No credentials (nor a signed-in session or token), or a user name and "
                'password that do not sign in; ``WWW-Authenticate: Basic realm="api", Token '
                'realm="api"``.'
            ),
            429: OpenApiResponse(description="Sign-in locked after repeated failures (``Retry-After``)."),
        },
    )
    @action(detail=False, methods=["post"], permission_classes=[AllowAny])
    def token(self, request):
        """Issue a new API token for ``Authorization: Token <key>``.

        With ``{"username", "password"}`` in the JSON or form body, or ``Authorization: Basic``
        (``curl -u user:password``), the token is for that user (a sign-in:
        throttled and audited like the sign-in page, see ``accounts.login_throttle``); without,
        for the signed-in caller (session or token). ``name`` labels the token. The key is in the
        answer only: the server keeps its hash. Each call issues another token (list and revoke
        them at ``/api/accounts/tokens/``); it expires after ``WEFT_TOKEN_TTL_DAYS`` when set.
        """
        body = request.data
        basic = basic_credentials(request)
        if basic is not None:
            if "username" in body or "password" in body:
                raise serializers.ValidationError(
                    {"detail": "Give the user name and password once: in the body or as Basic."}
                )
            body = {
                "username": basic[0],
                "password": basic[1],
                **({"name": body["name"]} if "name" in body else {}),
            }
        params = TokenRequestSerializer(data=body)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        if "username" in data:
            django_request = request._request  # axes marks the HttpRequest its middleware sees
            user = authenticate(django_request, username=data["username"], password=data["password"])
            if getattr(django_request, "axes_locked_out", False):
                return lockout_response(django_request)
            if user is None:
                raise AuthenticationFailed("Unable to sign in with the provided credentials.")
            via = "api credentials"
        else:
            user = request.user if request.user and request.user.is_authenticated else None
            if user is None:
                raise NotAuthenticated()
            via = "api"
        issued = create_token(user, data.get("name", ""), reason=via, actor=user)
        token = issued.token
        return Response(
            {
                "token": issued.key,
                "role": role_of(user).name.lower(),
                "id": token.pk,
                "name": token.name,
                "prefix": token.prefix,
                "expires_at": token.expires_at,
            }
        )

    def get_authenticate_header(self, request):
        if getattr(self, "action", None) == "token":
            return TOKEN_CHALLENGE
        return super().get_authenticate_header(request)


class ApiTokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """API tokens: every user lists and revokes (``DELETE``) their own; an Admin those of every
    user (``?user=<id>`` or ``?user__username=<name>``), but only a superuser those of a
    superuser. Keys are never shown (only their first 8 characters); new tokens come from
    ``POST /api/accounts/users/token/``."""

    queryset = ApiToken.objects.select_related("user")
    serializer_class = ApiTokenSerializer
    read_role = Role.VIEWER
    action_roles = {"destroy": Role.VIEWER}
    filterset_fields = ["user", "user__username", "name"]

    def get_queryset(self):
        queryset = super().get_queryset()
        if not has_role(self.request.user, Role.ADMIN):
            queryset = queryset.filter(user=self.request.user)
        return queryset

    def perform_destroy(self, instance):
        services.revoke_token_by(self.request.user, instance)


class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The audit log (Admin only, read-only: entries are append-only, ``accounts.models``)."""

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    read_role = Role.ADMIN
    filterset_fields = ["action", "username", "object_type", "object_id"]
