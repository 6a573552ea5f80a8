from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.tokens import create_token, revoke_user_tokens


class Command(BaseCommand):
    help = (
        "Issue an API token for a user and print it (the key is shown this once; the server keeps "
        "its hash). --revoke-others first revokes the user's other tokens."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for")
        parser.add_argument(
            "-r",
            "--revoke-others",
            "--reset",
            dest="revoke",
            action="store_true",
            help="revoke the user's other tokens first",
        )

    def handle(self, username, name, revoke, **opts):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user {username!r}")
        if revoke:
            revoke_user_tokens(user, reason="revoked by command")
        issued = create_token(user, name, reason="command")
        self.stdout.write(f"Generated token {issued.key} for user {username}")
