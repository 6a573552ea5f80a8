"""Who may post host reports (``POST /api/pools/agent/``).

A report rewrites a host's GPU inventory, as a discovery rewrites topology, so it needs what
running a discovery needs: the **Operator** role. Host agents should not carry a person's role:
a site gives them a service account in the **Host agent** group (``AGENT_GROUP``), which may post
reports and read (every signed-in user is a Viewer) and nothing else:
``manage.py set_role agent-01 viewer --create`` then add it to the group (admin) and
``manage.py create_token agent-01``. Which hosts a token may report for is decided after the
host is known (``pools.services.agents``: an agent token binds to the host of its first report).
"""

from __future__ import annotations

from accounts.permissions import RolePermission
from accounts.roles import Role, has_role

#: Django group whose members may post host reports without the Operator role
AGENT_GROUP = "Host agent"


class AgentReportPermission(RolePermission):
    """Operator (or above), or a member of :data:`AGENT_GROUP`; 401 anonymous, 403 otherwise."""

    message = "Posting host reports needs the Operator role or the 'Host agent' group."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated and user.is_active):
            return False
        if has_role(user, Role.OPERATOR):
            return True
        return user.groups.filter(name=AGENT_GROUP).exists()
