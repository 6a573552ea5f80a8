"""Template context: the user's role flags for showing or hiding controls."""

from .roles import Role, role_of


def roles(request) -> dict:
    role = role_of(getattr(request, "user", None))
    return {
        "weft_role": role.name.lower(),
        "is_operator": role >= Role.OPERATOR,
        "is_admin": role >= Role.ADMIN,
    }
