from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Users, roles (Viewer, Operator, Admin) and the audit log."""

    name = "accounts"

    def ready(self) -> None:
        from . import receivers  # noqa: F401  (connects them)
