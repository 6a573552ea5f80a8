"""``drf_create_token`` under Django REST framework's name and output ("Generated token <key> for user
<name>"), so scripts written for ``rest_framework.authtoken`` (no longer installed: tokens are
``accounts.ApiToken``, stored hashed) keep working. Same as ``create_token``."""

from .create_token import Command as CreateTokenCommand


class Command(CreateTokenCommand):
    help = "Same as create_token (kept under Django REST framework's name for existing scripts)."
