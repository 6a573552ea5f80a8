"""Test support: helpers and data shared by the apps' tests (NetBox keeps its own in ``utilities/testing``).

Test modules import data and helpers from here, never from another test module; fixtures shared
by every app (``users``, ``client_for``, ``viewer``, ``operator``, ``admin``, ``committed_signals``)
live in the root ``conftest.py``; browser/process fixtures in ``tests/browser_support.py`` and
``tests/process_support.py``. Outside the production package: nothing here is imported by the
running application (benches may use it).

- :mod:`tests.support.topologies`: small topology texts (``BASE``).
- :mod:`tests.support.signals`: record the fabric app's ``discovery_committed`` sends.
- :mod:`tests.support.ws`: websocket session headers and the worker-thread runner.
- :mod:`tests.support.telemetry`: an ORM-built fat tree and sweeps written as the sweep writes them.
- :mod:`tests.support.api`: every DRF route of the project's routers (the generic API tests).
- :mod:`tests.support.module_rows`: rows built once per test module, each test's writes rolled
  back (Django ``TestCase.setUpTestData``'s model); :mod:`tests.support.users`: the role users.
- :mod:`tests.support.localities`: synthetic scheduler locality trees (fat trees, 3-level, rail pods).
- :mod:`tests.support.waits`: ``wait_for``, a bounded wait on a condition (no fixed sleeps).
- :mod:`tests.support.ingest_rows`: ``CABLE_DOWN`` and ``snapshot`` (a fabric's stored topology rows).
- :mod:`tests.support.perfquery_text`: real ``perfquery`` output (``PLAIN_LID133``).
- :mod:`tests.support.agent_reports`: a GPU agent's report (``XML``, ``TOPO``, ``body``).
- :mod:`tests.support.snmp_counters`, :mod:`tests.support.traps`: snmpsim counters, real SNMP traps.
- :mod:`tests.support.placement_strategies`: Hypothesis strategies of the placement tests.
- :mod:`tests.support.map_pages`, :mod:`tests.support.pool_pages`, :mod:`tests.support.server_api`:
  browser-test helpers (sign in, import, open the map, the server's REST API).
- :mod:`tests.support.slapd` (entries in ``directory/weft.ldif``), :mod:`tests.support.oidc_provider`,
  :mod:`tests.support.oidc_flow`, :mod:`tests.support.directory_settings`: a real slapd and a real
  OpenID Connect provider on loopback, the browser's side of the code flow, and the directory
  sign-in settings of those tests (issue 26).
"""
