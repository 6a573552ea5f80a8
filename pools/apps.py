from django.apps import AppConfig


class PoolsConfig(AppConfig):
    """GPU inventory, pools, tenants and quotas (a later issue)."""

    name = "pools"
