"""``python -m tests.support.oidc_provider.serve PORT``: migrate the test provider's database, load
its users, groups, RSA key and client (``tests.support.oidc_provider``), then serve on
``127.0.0.1:PORT`` (Django's development server, threaded, no reloader)."""

import os
import sys

import django


def main(port: str) -> None:
    django.setup()
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from oidc_provider.models import Client, ResponseType

    from tests.support.oidc_provider import CLIENT_ID, CLIENT_SECRET, REDIRECT_URI, USERS, password_of

    call_command("migrate", verbosity=0, interactive=False)
    call_command("creatersakey")
    for name, groups in USERS.items():
        user = User.objects.create_user(name, email=f"{name}@idp.test", password=password_of(name))
        user.first_name, user.last_name = name.split("-")[1].capitalize(), "Sso"
        user.save()
        user.groups.set([Group.objects.get_or_create(name=g)[0] for g in groups])
    client = Client.objects.create(
        name="Weft",
        client_type="confidential",
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        jwt_alg="RS256",
        require_consent=False,
        reuse_consent=True,
        _redirect_uris=os.environ.get("OIDC_TEST_REDIRECT_URI", REDIRECT_URI),
        _scope="openid email profile groups",
    )
    client.response_types.set(ResponseType.objects.filter(value="code"))
    call_command("runserver", f"127.0.0.1:{port}", use_reloader=False, use_threading=True)


if __name__ == "__main__":
    main(sys.argv[1])
