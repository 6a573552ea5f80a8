"""The REST answers of the fabric app's domain errors, declared once (``core.api.errors.answer``,
called from ``FabricConfig.ready``): every view lets these errors go and the one handler answers.

| error | answer |
| --- | --- |
| ``PortActionRefused`` (a CA port, the SM's own path) | 409 ``{"detail"}`` |
| ``PortActionFailed`` (the tool failed) | 502 ``{"detail"}`` |
| ``NoLiveAccess`` (a fabric without live access asked to discover) | 409 ``{"detail"}`` |
| ``ImportWouldRemove`` (an import would remove too much; ``replace`` not set) | 409 ``as_dict()`` |
| ``TopologyParseError``, ``PartitionsParseError`` (located parse errors) | 400 ``{"error", "source", "line"}`` |
| ``PartitionError`` (a refused partition change) | 400 ``{field: [message]}`` |
| ``PartitionOwned`` (a pool's or job's partition changed by someone else) | 409 ``{"detail"}`` |
| ``RoleError`` (a switch role change refused) | 400 ``{"switches": [message]}`` |
"""

from __future__ import annotations

from rest_framework import status

from core.api.errors import answer, located_body

from ..parsers.partitions import PartitionsParseError
from ..parsers.records import TopologyParseError
from ..services.ingest import ImportWouldRemove
from ..services.partitions import PartitionError, PartitionOwned
from ..services.portactions import PortActionFailed, PortActionRefused
from ..services.requests import NoLiveAccess
from ..services.roles import RoleError


def register() -> None:
    """Declare the answers above (idempotent)."""
    answer(status.HTTP_409_CONFLICT, PortActionRefused, NoLiveAccess, PartitionOwned)
    answer(status.HTTP_502_BAD_GATEWAY, PortActionFailed)
    answer(status.HTTP_409_CONFLICT, ImportWouldRemove, body=lambda exc: exc.as_dict())
    answer(status.HTTP_400_BAD_REQUEST, TopologyParseError, PartitionsParseError, body=located_body)
    answer(status.HTTP_400_BAD_REQUEST, PartitionError, body=lambda exc: {exc.field: [str(exc)]})
    answer(status.HTTP_400_BAD_REQUEST, RoleError, body=lambda exc: {"switches": [str(exc)]})
