from django.contrib.auth import get_user_model
from django.db import transaction
from rest_framework import mixins, viewsets
from rest_framework.authtoken.models import Token
from rest_framework.decorators import action
from rest_framework.response import Response

from .. import audit
from ..models import AuditEntry
from ..roles import Role, role_of
from .mixins import AuditedWritesMixin
from .serializers import AuditEntrySerializer, UserSerializer


class UserViewSet(AuditedWritesMixin, viewsets.ModelViewSet):
    """Users and their roles (Admin only). ``me`` returns the caller (any role). Changes are audited
    (``user.create``/``user.update``/``user.delete``) in their transaction."""

    queryset = get_user_model().objects.order_by("username")
    serializer_class = UserSerializer
    read_role = Role.ADMIN
    write_role = Role.ADMIN
    action_roles = {"me": Role.VIEWER, "token": Role.VIEWER}
    filterset_fields = ["username", "is_active"]
    audit_prefix = "user"

    def audit_create_changes(self, serializer, instance):
        return {"role": serializer.validated_data.get("role", "viewer")}

    def audit_update_changes(self, serializer, before, after):
        changes = {k: v for k, v in serializer.validated_data.items() if k != "password"}
        if "password" in serializer.validated_data:
            changes["password"] = "changed"  # never the password itself
        return changes

    @action(detail=False, methods=["get"])
    def me(self, request):
        return Response(UserSerializer(request.user).data)

    @action(detail=False, methods=["post"])
    def token(self, request):
        """Create (or return) the caller's API token for ``Authorization: Token <key>``."""
        with transaction.atomic():
            token, created = Token.objects.get_or_create(user=request.user)
            if created:
                audit.record("user.token.create", request.user)
        return Response({"token": token.key, "role": role_of(request.user).name.lower()})


class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The audit log (Admin only, read-only)."""

    queryset = AuditEntry.objects.all()
    serializer_class = AuditEntrySerializer
    read_role = Role.ADMIN
    filterset_fields = ["action", "username", "object_type", "object_id"]
