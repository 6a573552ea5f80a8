"""Event types the UFM-compatible API writes (registered in ``UfmConfig.ready()``): none of its
own. Isolating a port (UFM's "unhealthy ports" with action ``isolate``) writes the fabric's
``port.isolated``/``port.isolation_cleared`` through ``fabric.services.isolation``, the one writer
of isolated ports, as the port page's Disable/Enable does.
"""

EVENT_TYPES: list = []
