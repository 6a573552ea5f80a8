"""A real OpenLDAP server (Debian's ``slapd``) for the directory sign-in tests (issue 26).

:func:`start_slapd` builds a private ``slapd.d`` from :data:`CONFIG_LDIF` with ``slapadd -n0``,
loads the directory's entries (an LDIF, e.g. ``tests/support/directory/weft.ldif``) with
``slapadd -n1``, and runs ``slapd`` in the foreground on ``ldap://127.0.0.1:<free port>/`` in its
own process group; :meth:`Slapd.stop` ends it by its pid. The database is an MDB with the
``ppolicy`` overlay (a default policy with ``pwdLockout``), so an entry with
``pwdAccountLockedTime: 000001010000Z`` is a disabled account: its bind fails (RFC draft
behera-ldap-password-policy §5.2.7 / slapo-ppolicy(5)).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

SUFFIX = "dc=weft,dc=test"
ROOT_DN = f"cn=admin,{SUFFIX}"
ROOT_PW = "slapd-root-secret"
DATA_LDIF = Path(__file__).parent / "directory" / "weft.ldif"

CONFIG_LDIF = """\
dn: cn=config
objectClass: olcGlobal
cn: config
olcPidFile: {dir}/slapd.pid

dn: cn=module{{0}},cn=config
objectClass: olcModuleList
cn: module{{0}}
olcModulePath: /usr/lib/ldap
olcModuleLoad: back_mdb
olcModuleLoad: ppolicy

dn: cn=schema,cn=config
objectClass: olcSchemaConfig
cn: schema

include: file:///etc/ldap/schema/core.ldif
include: file:///etc/ldap/schema/cosine.ldif
include: file:///etc/ldap/schema/nis.ldif
include: file:///etc/ldap/schema/inetorgperson.ldif

dn: olcDatabase={{0}}config,cn=config
objectClass: olcDatabaseConfig
olcDatabase: {{0}}config
olcAccess: {{0}}to * by * none

dn: olcDatabase={{1}}mdb,cn=config
objectClass: olcDatabaseConfig
objectClass: olcMdbConfig
olcDatabase: {{1}}mdb
olcSuffix: {suffix}
olcRootDN: {root_dn}
olcRootPW: {root_pw}
olcDbDirectory: {dir}/db
olcDbMaxSize: 16777216
olcAccess: {{0}}to attrs=userPassword by anonymous auth by self read by * none
olcAccess: {{1}}to * by * read

dn: olcOverlay={{0}}ppolicy,olcDatabase={{1}}mdb,cn=config
objectClass: olcOverlayConfig
objectClass: olcPPolicyConfig
olcOverlay: {{0}}ppolicy
olcPPolicyDefault: cn=default,ou=policies,{suffix}
"""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Slapd:
    """A running slapd: its URI, process, and folder."""

    uri: str
    process: subprocess.Popen
    folder: Path

    def stop(self) -> None:
        """End slapd by its pid (its own process group), then wait for it."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)

    def modify(self, dn: str, changes: list[tuple[int, str, list[str]]]) -> None:
        """Apply ``[(ldap.MOD_ADD | MOD_DELETE | MOD_REPLACE, attribute, [values])]`` to ``dn``
        as the root DN (python-ldap, over the network like any client)."""
        import ldap

        conn = ldap.initialize(self.uri)
        try:
            conn.simple_bind_s(ROOT_DN, ROOT_PW)
            conn.modify_s(dn, [(op, attr, [v.encode() for v in values]) for op, attr, values in changes])
        finally:
            conn.unbind_s()


def slapd_available() -> bool:
    return (
        bool(shutil.which("slapd") or Path("/usr/sbin/slapd").exists())
        and Path("/usr/lib/ldap/back_mdb.so").exists()
    )


def start_slapd(folder: Path, data: Path = DATA_LDIF, timeout: float = 15.0) -> Slapd:
    """Build and start a slapd in ``folder`` with the entries of ``data`` (see the module
    docstring). Skips the test when Debian's slapd is not installed (bin/setup installs it).

    Raises:
        RuntimeError: slapadd failed or slapd did not answer within ``timeout`` seconds (its
            output is in the message).
    """
    if not slapd_available():
        pytest.skip("slapd (Debian package slapd) is not installed: run bin/setup")
    slapd_bin = shutil.which("slapd") or "/usr/sbin/slapd"
    slapadd = shutil.which("slapadd") or "/usr/sbin/slapadd"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "slapd.d").mkdir()
    (folder / "db").mkdir()
    config = folder / "config.ldif"
    config.write_text(CONFIG_LDIF.format(dir=folder, suffix=SUFFIX, root_dn=ROOT_DN, root_pw=ROOT_PW))
    for args in (["-n0", "-l", str(config)], ["-n1", "-l", str(data)]):
        done = subprocess.run(
            [slapadd, "-F", str(folder / "slapd.d"), *args], capture_output=True, text=True, timeout=60
        )
        if done.returncode:
            raise RuntimeError(f"slapadd {' '.join(args)} failed: {done.stderr.strip()}")
    port = free_port()
    uri = f"ldap://127.0.0.1:{port}"
    log = (folder / "slapd.log").open("w")
    process = subprocess.Popen(
        [slapd_bin, "-d", "0", "-F", str(folder / "slapd.d"), "-h", f"{uri}/"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = Slapd(uri=uri, process=process, folder=folder)
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(
                f"slapd exited {process.returncode}: {(folder / 'slapd.log').read_text()[-2000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return server
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"slapd did not listen on {uri} within {timeout} s") from None
            time.sleep(0.05)
