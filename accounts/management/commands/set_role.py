from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from accounts import audit
from accounts.roles import Role, set_role


class Command(BaseCommand):
    help = "Give a user a Weft role: viewer, operator or admin (creating the user with --create)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("role", choices=["viewer", "operator", "admin"])
        parser.add_argument("--create", action="store_true", help="create the user if missing")
        parser.add_argument("--password", help="set this password")

    def handle(self, username, role, create, password, **opts):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user {username!r} (use --create)")
            try:  # the model's rules (not blank, at most 150 characters, letters, digits and @.+-_)
                User._meta.get_field(User.USERNAME_FIELD).clean(username, None)
            except ValidationError as exc:
                raise CommandError(f"user name {username!r}: {' '.join(exc.messages)}") from exc
            user = User.objects.create(username=username)
        if password:
            user.set_password(password)
            user.save()
        set_role(user, Role.parse(role))
        audit.record("user.role", user, {"role": role})
        self.stdout.write(f"{username}: {role}")
