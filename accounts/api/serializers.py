from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import EmailValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.validators import printable_text

from ..models import ApiToken, AuditEntry
from ..roles import Role, role_of, set_role


@extend_schema_field(
    {
        "type": "string",
        "enum": ["none", "viewer", "operator", "admin"],
        "description": "the Weft role; `none` (answers only) for an inactive user, who has no access",
    }
)
class _RoleField(serializers.ChoiceField):
    """The role: set as ``viewer``/``operator``/``admin``; read back ``none`` for an inactive user."""


@extend_schema_field(
    {"type": "string", "maxLength": 254, "anyOf": [{"format": "email"}, {"maxLength": 0}],
     "description": "an e-mail address, or empty (no mail)"}
)  # fmt: skip
class _BlankableEmailField(serializers.CharField):
    """A user's e-mail: an address (validated), or "" (Django's ``User.email`` is ``blank=True``)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        # checked here, not as a field validator: spectacular would document every value as an email
        if value:
            try:
                EmailValidator()(value)
            except DjangoValidationError:
                raise serializers.ValidationError("Enter a valid email address.") from None
        return value


class UserSerializer(serializers.ModelSerializer):
    """A user with its Weft role (``viewer``, ``operator``, ``admin``)."""

    role = _RoleField(choices=["viewer", "operator", "admin"], required=False)
    email = _BlankableEmailField(required=False, allow_blank=True, max_length=254)
    password = serializers.CharField(write_only=True, required=False, style={"input_type": "password"})

    class Meta:
        model = get_user_model()
        fields = ["id", "username", "email", "is_active", "role", "password", "last_login", "date_joined"]
        read_only_fields = ["last_login", "date_joined"]

    def to_representation(self, instance):
        data = super().to_representation(instance)
        data["role"] = role_of(instance).name.lower() if instance.is_active else "none"
        return data

    def validate_username(self, value: str) -> str:
        """Unique without regard to case: a directory sign-in looks names up case-insensitively
        (django-auth-ldap), so ``Ada`` beside ``ada`` would make both unusable from the directory."""
        clash = get_user_model().objects.filter(username__iexact=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        taken = clash.values_list("username", flat=True).first()
        if taken is not None:
            raise serializers.ValidationError(
                f"the user name {taken!r} exists (names differ by more than case)"
            )
        return value

    def validate(self, attrs):
        password = attrs.get("password")
        if password:
            from django.contrib.auth.password_validation import validate_password
            from django.core.exceptions import ValidationError as DjangoValidationError

            candidate = self.instance or get_user_model()(username=attrs.get("username", ""))
            try:
                validate_password(password, candidate)
            except DjangoValidationError as exc:
                raise serializers.ValidationError({"password": list(exc.messages)})
        return attrs

    def _apply(self, user, role, password):
        if password:
            user.set_password(password)
            user.save(update_fields=["password"])
        if role:
            set_role(user, Role.parse(role))

    def create(self, validated_data):
        role = validated_data.pop("role", "viewer")
        password = validated_data.pop("password", None)
        user = get_user_model().objects.create(**validated_data)
        if not password:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        self._apply(user, role, password)
        return user

    def update(self, instance, validated_data):
        role = validated_data.pop("role", None)
        password = validated_data.pop("password", None)
        instance = super().update(instance, validated_data)
        self._apply(instance, role, password)
        return instance


class AuditEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEntry
        fields = [
            "id",
            "at",
            "username",
            "action",
            "object_type",
            "object_id",
            "object_repr",
            "changes",
            "remote_addr",
        ]


class ApiTokenSerializer(serializers.ModelSerializer):
    """An API token as listed: never its key (only its SHA-256 is stored), its first 8 characters
    (``prefix``) to tell it apart."""

    user = serializers.SlugRelatedField(slug_field="username", read_only=True)
    user_id = serializers.IntegerField(read_only=True)
    expired = serializers.BooleanField(read_only=True)

    class Meta:
        model = ApiToken
        fields = [
            "id",
            "user",
            "user_id",
            "name",
            "prefix",
            "created",
            "expires_at",
            "last_used_at",
            "expired",
        ]
        read_only_fields = fields


class TokenRequestSerializer(serializers.Serializer):
    """``POST /api/accounts/users/token/``: a user name and password to sign in with (both, or
    neither to use the request's own session or token), and an optional name for the token."""

    username = serializers.CharField(required=False, max_length=150)
    password = serializers.CharField(required=False, max_length=4096, trim_whitespace=False)
    name = serializers.CharField(
        required=False, allow_blank=True, max_length=100, default="", validators=[printable_text]
    )

    def validate(self, attrs):
        if ("username" in attrs) != ("password" in attrs):
            raise serializers.ValidationError("Give both username and password, or neither.")
        return attrs


class TokenResponseSerializer(serializers.Serializer):
    """The new token's key (shown this once), the owner's role, and the token as listed."""

    token = serializers.CharField()
    role = serializers.ChoiceField(choices=["none", "viewer", "operator", "admin"])
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField()
    expires_at = serializers.DateTimeField(allow_null=True)
