"""The test provider's claims: the standard ones from the user, and a ``groups`` scope whose
``groups`` claim lists the user's Django groups at the provider."""

from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims, user):
    """``OIDC_USERINFO``: the standard claims of ``user``."""
    claims["preferred_username"] = user.username
    claims["email"] = user.email
    claims["email_verified"] = True
    claims["given_name"] = user.first_name
    claims["family_name"] = user.last_name
    claims["name"] = f"{user.first_name} {user.last_name}".strip()
    return claims


class GroupsScopeClaims(ScopeClaims):
    """``OIDC_EXTRA_SCOPE_CLAIMS``: scope ``groups`` → claim ``groups``."""

    info_groups = ("Groups", "The groups you are in.")

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
