"""The lab's receivers: what a lab fabric needs that real hardware does by itself.

:func:`retrain_enabled_ports` (``fabric.signals.ports_enabled``): a real switch port trains its
link once it is enabled; an ibsim port stays Polling after ``ibportstate ... enable`` (ibsim does
no link training), so a link an admin disabled and enabled again on a lab would stay down for
good. When the fabric's ``tool_env`` names a lab's console socket
(:data:`lab.core.CONSOLE_SOCKET_ENV`, set while a ``lab.console_server.ConsoleServer`` serves the
lab: the demo, ``fabric_lab``), the lab is asked to train each enabled port
(``retrain NODE PORT``: ``Lab.retrain``). A fabric without it (every real one) is left alone.
"""

from __future__ import annotations

import logging
import os
import stat

from django.dispatch import receiver

from fabric.models import Fabric
from fabric.signals import ports_enabled

from .console_server import request
from .core import CONSOLE_SOCKET_ENV

log = logging.getLogger(__name__)

#: seconds to wait for the lab's answer to one retrain (two ibsim console commands)
RETRAIN_TIMEOUT_S = 10.0


def own_console_socket(path: str) -> bool:
    """True when ``path`` is a lab console socket this process's user made: a UNIX socket named
    ``console.sock``, owned by this user, readable by no one else (``ConsoleServer`` binds it
    0600). ``tool_env`` can be set through the API: Weft writes to no other socket."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (
        os.path.basename(path) == "console.sock"
        and stat.S_ISSOCK(st.st_mode)
        and st.st_uid == os.getuid()
        and not st.st_mode & 0o077
    )


@receiver(ports_enabled, dispatch_uid="lab.retrain_enabled_ports")
def retrain_enabled_ports(sender, fabric_id: int, ports: list[tuple[str, int]], **kwargs) -> None:
    """Ask the lab serving fabric ``fabric_id`` (if any) to train the links of ``ports``
    (``[(node GUID, port)]``). Logs a warning when the lab refuses or does not answer; never
    raises (the enable itself is done and recorded)."""
    env = Fabric.objects.filter(pk=fabric_id).values_list("tool_env", flat=True).first() or {}
    path = env.get(CONSOLE_SOCKET_ENV) if isinstance(env, dict) else None
    if not path:
        return
    if not own_console_socket(path):
        log.warning("fabric %s: %s=%s is not a lab console socket of this user; not retraining",
                    fabric_id, CONSOLE_SOCKET_ENV, path)  # fmt: skip
        return
    for guid, port in ports:
        try:
            answer = request(path, f"retrain {guid} {int(port)}", timeout=RETRAIN_TIMEOUT_S)
        except OSError as exc:
            log.warning("fabric %s: the lab console %s did not answer: %s", fabric_id, path, exc)
            return
        if not answer.startswith("ok"):
            log.warning("fabric %s: the lab did not retrain %s port %s: %s", fabric_id, guid, port, answer)
