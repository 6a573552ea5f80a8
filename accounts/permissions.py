"""REST permission by role (see ``accounts.roles``).

Views declare what they need; the default is strict:

* safe methods (GET, HEAD, OPTIONS) need ``read_role`` (default Viewer);
* other methods need ``write_role`` (default Admin);
* ``action_roles = {"acknowledge": "operator"}`` sets the role of a named viewset action.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, BasePermission

from .roles import Role, has_role


class RolePermission(BasePermission):
    """Allow a request when the user's role reaches the one the view asks for."""

    message = "Your role does not allow this."

    def required_role(self, request, view) -> Role:
        action = getattr(view, "action", None)
        action_roles = getattr(view, "action_roles", {}) or {}
        if action and action in action_roles:
            return Role.parse(action_roles[action])
        if request.method in SAFE_METHODS:
            return Role.parse(getattr(view, "read_role", Role.VIEWER))
        return Role.parse(getattr(view, "write_role", Role.ADMIN))

    def has_permission(self, request, view) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return has_role(request.user, self.required_role(request, view))
