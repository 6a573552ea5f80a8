"""Helpers shared by the apps' tests (NetBox keeps its own in ``utilities/testing``).

Test modules import data and helpers from here, never from another test module; fixtures shared
by every app (``users``, ``client_for``, ``viewer``, ``operator``, ``admin``, ``committed_signals``)
live in the root ``conftest.py``. Nothing here is imported by the running application.

- :mod:`weft.testing.topologies`: small topology texts (``BASE``).
- :mod:`weft.testing.signals`: record the fabric app's ``discovery_committed`` sends.
- :mod:`weft.testing.ws`: websocket session headers and the worker-thread runner.
- :mod:`weft.testing.telemetry`: an ORM-built fat tree and sweeps written as the sweep writes them.
- :mod:`weft.testing.api`: every DRF route of the project's routers (the generic API tests).
- :mod:`weft.testing.localities`: synthetic scheduler locality trees (fat trees, 3-level, rail pods).
- :mod:`weft.testing.waits`: ``wait_for``, a bounded wait on a condition (no fixed sleeps).
"""
