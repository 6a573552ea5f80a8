from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users, roles (Viewer, Operator, Admin) and the audit log."""

    name = "accounts"

    def ready(self) -> None:
        from . import signals  # noqa: F401
