"""pytest fixtures of the fabric lab (loaded by ``-p lab.pytest_plugin`` in pyproject.toml).

- ``@pytest.mark.lab``: the test needs ibsim/OpenSM/infiniband-diags; skipped with the missing
  program and its Debian package named when they are not installed.
- ``lab_factory(netfile, **kw) -> Lab``: starts a lab (``Lab(netfile, **kw).start()``, ``timeout=``
  goes to ``start``); every lab it started is stopped at teardown, also when the test fails.
- ``small_lab``: module-scoped lab on ibsim's ``net.2sw2path4hca`` (2 switches, 4 CAs) from
  ``$WEFT_REALDATA/ibsim_net``, or the same fabric generated when realdata is absent.
- ``default_socket_lab_factory(netfile, **kw) -> Lab``: a lab on ibsim's *default* socket, as one
  started by hand (``ibsim net`` without ``IBSIM_SOCKNAME``). Only one can run per machine: the
  fixture holds a lock file for the test (other Weft test processes wait for it) and skips when
  something else (a hand-started ibsim) already has the socket.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# No Django import here: the plugin loads before Django settings are configured.
from lab.core import (
    IBSIM_DEFAULT_SOCKET,
    Lab,
    LabError,
    default_socket_in_use,
    live_labs,
    tools_missing_reason,
)

SMALL_NET = "ibsim_net/ibsim_net.2sw2path4hca"


def _realdata_root() -> Path:
    return Path(os.environ.get("WEFT_REALDATA", Path(__file__).resolve().parents[2] / "shared" / "realdata"))


def small_netfile() -> str | Path:
    """ibsim's net.2sw2path4hca from realdata, or an equivalent generated netfile (2 switches joined by
    two links on ports 3 and 5, two CAs on each)."""
    path = _realdata_root() / SMALL_NET
    if path.is_file():
        return path
    from lab.netgen import two_switch_four_ca

    return two_switch_four_ca()


def pytest_configure(config: pytest.Config) -> None:
    # The marker is also declared in pyproject.toml; declaring it here keeps the plugin usable alone.
    config.addinivalue_line("markers", "lab: needs the fabric lab (ibsim, opensm, infiniband-diags)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``lab`` tests, with the reason, when the lab programs are not installed."""
    lab_items = [item for item in items if "lab" in item.keywords and item.get_closest_marker("lab")]
    if not lab_items:
        return
    reason = tools_missing_reason()
    if reason is None:
        return
    marker = pytest.mark.skip(reason=f"lab: {reason}")
    for item in lab_items:
        item.add_marker(marker)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Safety net: a lab a test started and never stopped (no fixture, no ``with``) is stopped here,
    OpenSM before ibsim, and named in the terminal summary so the leak gets fixed."""
    leaked = live_labs()
    for lab in leaked:
        lab.stop()
    if leaked:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"lab: stopped {len(leaked)} lab(s) left running by tests: " + ", ".join(map(repr, leaked)),
                yellow=True,
            )


def _skip_if_missing() -> None:
    reason = tools_missing_reason()
    if reason:
        pytest.skip(f"lab: {reason}")


@pytest.fixture
def lab_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Lab]]:
    """``lab_factory(netfile, timeout=60, **Lab kwargs) -> started Lab``; all stopped at teardown."""
    _skip_if_missing()
    labs: list[Lab] = []

    def make(netfile: str | Path, *, timeout: float = 60, **kw) -> Lab:
        lab = Lab(netfile, **kw)
        labs.append(lab)
        return lab.start(timeout=timeout)

    try:
        yield make
    finally:
        for lab in reversed(labs):
            lab.stop()


@pytest.fixture(scope="module")
def small_lab() -> Iterator[Lab]:
    """A started lab on the 2-switch, 4-CA fabric (``net.2sw2path4hca``), shared by a test module."""
    _skip_if_missing()
    lab = Lab(small_netfile())
    try:
        yield lab.start()
    finally:
        lab.stop()


#: Serialises the tests that run ibsim on its default socket, across test processes of this user.
DEFAULT_SOCKET_LOCK = Path(tempfile.gettempdir()) / f"weft-ibsim-default-socket-{os.getuid()}.lock"


@pytest.fixture
def default_socket_lab_factory() -> Iterator[Callable[..., Lab]]:
    """``make(netfile, timeout=60, **Lab kwargs) -> started Lab`` on ibsim's default socket.

    Waits up to 120 s for the lock of other Weft tests on that socket, skips when the socket is
    taken by a process outside Weft's tests (or the lock is held that long). One lab per test."""
    _skip_if_missing()
    with open(DEFAULT_SOCKET_LOCK, "w") as lock:
        deadline = time.monotonic() + 120
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.skip("lab: another test held ibsim's default socket for 120 s")
                time.sleep(0.2)
        labs: list[Lab] = []

        def make(netfile: str | Path, *, timeout: float = 60, **kw) -> Lab:
            if labs:
                raise LabError("one lab on ibsim's default socket per test")
            if default_socket_in_use():
                pytest.skip(
                    f"lab: ibsim's default socket {IBSIM_DEFAULT_SOCKET!r} is in use by another program"
                )
            lab = Lab(netfile, socket_name=IBSIM_DEFAULT_SOCKET, **kw)
            labs.append(lab)
            return lab.start(timeout=timeout)

        try:
            yield make
        finally:
            for lab in labs:
                lab.stop()
            fcntl.flock(lock, fcntl.LOCK_UN)
