"""Weft's Slurm tree exports loaded into a real ``slurmctld`` (Debian's ``slurmctld`` 22.05).

For every ibnetdiscover file of ``$WEFT_REALDATA`` that has hosts, the file is imported through
the real ingest, exported in the tree form, and that ``topology.conf`` is loaded by slurmctld with
``TopologyPlugin=topology/tree``, every exported host a ``State=CLOUD`` node (no slurmd needed),
on loopback, in the foreground (``-D``), with ``auth/none`` and a temporary
``StateSaveLocation`` (``slurm.conf(5)``); ``scontrol show topology`` then says what Slurm
understood: each switch's ``Level`` (0 for a switch with nodes, else one more than its highest
child; ``src/plugins/topology/tree/switch_record.c``) and the nodes below it. Both are compared
with Weft's locality: every switch is a Weft domain with exactly that domain's hosts, and every
host sits under one switch per Weft level that has a switch (no switch level skipped, e.g.
Selene's ``MLG01-04`` under its spine ``MSPINE3-01``). The real ``topology.conf`` files of
``$WEFT_REALDATA/slurm_topology`` are loaded too, as the check that Weft reads them
(``parse_topology_conf``) as Slurm does.

Marked ``slow``; skipped, with the reason, where ``slurmctld``/``scontrol`` are not installed
(``bin/setup`` installs them).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

from core.errors import LocatedError
from fabric.services.ingest import import_topology_text
from scheduler.exports import ExportError, export, parse_topology_conf
from scheduler.hostlist import expand, fold
from scheduler.locality import Locality
from scheduler.topology import build_locality
from tests.support.waits import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (shutil.which("slurmctld") and shutil.which("scontrol")),
        reason="slurmctld/scontrol not installed (apt package slurmctld, see bin/setup)",
    ),
]

#: this helper's loopback ports (slurmctld, and the slurmd port it must name)
PORTS = range(8200, 8210)


def _free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as slurmctld (TIME_WAIT is fine)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip(f"no free loopback port in {PORTS.start}-{PORTS.stop - 1}")


class Slurmctld:
    """A foreground slurmctld on loopback in ``root``, loading ``topology`` for ``nodes``."""

    def __init__(self, root: Path, nodes: list[str], topology: str) -> None:
        self.root = root
        (root / "state").mkdir(parents=True, exist_ok=True)
        port = _free_port()
        user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
        self.conf = root / "slurm.conf"
        self.conf.write_text(
            "\n".join([
                "ClusterName=weft",
                "SlurmctldHost=localhost(127.0.0.1)",
                f"SlurmctldPort={port}",
                f"SlurmdPort={port + 1 if port + 1 in PORTS else port - 1}",
                f"SlurmUser={user}",
                "AuthType=auth/none",
                "CredType=cred/none",
                f"StateSaveLocation={root / 'state'}",
                f"SlurmdSpoolDir={root / 'spool'}",
                f"SlurmctldPidFile={root / 'slurmctld.pid'}",
                f"SlurmctldLogFile={root / 'slurmctld.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "MpiDefault=none",
                "SchedulerType=sched/builtin",
                "SelectType=select/linear",
                "TopologyPlugin=topology/tree",
                f"NodeName={fold(nodes)} State=CLOUD",
                "PartitionName=all Nodes=ALL Default=YES",
                "",
            ])
        )  # fmt: skip
        (root / "topology.conf").write_text(topology)
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.proc = subprocess.Popen(
            ["slurmctld", "-D", "-i", "-f", str(self.conf)],
            env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip

    def scontrol(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["scontrol", *args], env=self.env, capture_output=True, text=True, timeout=20)

    def topology(self) -> str:
        """``scontrol show topology`` once slurmctld answers (bounded wait)."""

        def answer():
            if self.proc.poll() is not None:
                log = (self.root / "slurmctld.log").read_text(errors="replace")[-3000:]
                raise AssertionError(f"slurmctld exited {self.proc.returncode}:\n{log}")
            out = self.scontrol("show", "topology")
            return out.stdout if out.returncode == 0 and "SwitchName=" in out.stdout else None

        return wait_for(answer, 60, "slurmctld to answer scontrol show topology")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


def slurm_topology(text: str) -> dict[str, dict]:
    """``scontrol show topology`` → ``{switch: {"level": int, "nodes": set, "switches": list}}``."""
    out = {}
    for line in text.splitlines():
        pairs = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "SwitchName" not in pairs:
            continue
        out[pairs["SwitchName"]] = {
            "level": int(pairs["Level"]),
            "nodes": set(expand(pairs["Nodes"])) if pairs.get("Nodes") else set(),
            "switches": expand(pairs["Switches"]) if pairs.get("Switches") else [],
        }
    return out


def _loaded(tmp_path: Path, name: str, nodes: list[str], conf: str) -> dict[str, dict]:
    ctl = Slurmctld(tmp_path / re.sub(r"[^A-Za-z0-9_.-]", "_", name), nodes, conf)
    try:
        return slurm_topology(ctl.topology())
    finally:
        ctl.stop()


def _switch_domains(text: str) -> dict[str, str]:
    """SwitchName → Weft domain key, from the comment the tree export writes above each line."""
    out, key = {}, None
    for line in text.splitlines():
        m = re.match(r"# \S+ (f\d+/\S+): ", line)
        if m:
            key = m.group(1)
        elif line.startswith("SwitchName="):
            out[line.split()[0].split("=", 1)[1]] = key
    return out


def _check_against_locality(loc: Locality, text: str, slurm: dict[str, dict]) -> None:
    written = {h for c in parse_topology_conf(text) if c.nodes for h in c.nodes}
    domains = _switch_domains(text)
    assert set(slurm) == set(domains)
    for switch, key in domains.items():
        d = loc.domains[key]
        assert slurm[switch]["nodes"] == set(d.hosts) & written, switch
        for child in slurm[switch]["switches"]:
            assert loc.domains[domains[child]].tier < d.tier
            assert slurm[child]["level"] < slurm[switch]["level"]
    # every Weft level with a switch of its own is a Slurm switch above the host
    for host in written:
        site = loc.hosts[host]
        want = {
            site.domain(t) for t in range(1, 5) if site.domain(t) and loc.domains[site.domain(t)].switches
        }
        have = {domains[s] for s, v in slurm.items() if host in v["nodes"]}
        assert want <= have, (host, want - have)


def _check_block_and_yaml(loc: Locality, fabric_id: int, tree_hosts: set[str]) -> None:
    """The block and yaml forms against ``topology.conf(5)`` / ``topology.yaml(5)`` (Slurm 23.11+
    and 25.05: Debian's 22.05 has no topology/block, so the grammar, not the daemon):
    ``BlockName=… Nodes=…`` lines, ``BlockSizes=`` base then base·2^k, no block under the base;
    the yaml a list of ``{topology, cluster_default, tree: {switches: [{switch, children | nodes}]}}``
    and ``{…, block: {block_sizes, blocks: [{block, nodes}]}}``, the same switches and blocks."""
    block = export(loc, "slurm-block", fabric_ids=[fabric_id])
    lines = parse_topology_conf(block.text)
    blocks = [c for c in lines if c.kind == "block"]
    (sizes,) = [c.sizes for c in lines if c.kind == "block_sizes"]
    assert blocks and all(len(c.nodes) >= sizes[0] for c in blocks)
    in_blocks = {h for c in blocks for h in c.nodes}
    assert in_blocks <= tree_hosts
    if in_blocks != tree_hosts:  # units under the base are said, in the header and the warnings
        assert "# left out:" in block.text and any("left out" in w for w in block.warnings)
    doc = yaml.safe_load(export(loc, "slurm-yaml", fabric_ids=[fabric_id]).text)
    tree, blk = doc
    assert set(tree) == {"topology", "cluster_default", "tree"} and tree["cluster_default"] is True
    assert set(blk) == {"topology", "cluster_default", "block"} and blk["cluster_default"] is False
    for sw in tree["tree"]["switches"]:
        assert set(sw) in ({"switch", "nodes"}, {"switch", "children"}), sw
        assert isinstance(sw["switch"], str) and isinstance(sw.get("nodes", sw.get("children")), str)
    assert {h for sw in tree["tree"]["switches"] if "nodes" in sw for h in expand(sw["nodes"])} == tree_hosts
    assert blk["block"]["block_sizes"] == sizes
    assert [(b["block"], expand(b["nodes"])) for b in blk["block"]["blocks"]] == [
        (c.name, c.nodes) for c in blocks
    ]


def _ibnetdiscover_files(realdata: Path) -> list[Path]:
    return sorted(
        p for p in (realdata / "ibnetdiscover").iterdir() if p.suffix in (".txt", ".out", ".topo", ".gz")
    )


def test_every_tree_export_of_the_real_files_loads_into_slurmctld(realdata, db, tmp_path, committed_signals):
    loaded = []
    for path in _ibnetdiscover_files(realdata):
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if path.suffix == ".gz" else raw).decode("utf-8", errors="replace")
        try:
            fabric = import_topology_text(path.stem[:60], text, filename=path.name).fabric
        except Exception as exc:  # a file the ingest refuses (the hand-edited negative samples)
            assert "EDITED" in path.name or "isolated" in path.name, (path.name, exc)
            continue
        loc = build_locality([fabric])
        try:
            out = export(loc, "slurm-tree", fabric_ids=[fabric.pk])
        except ExportError:  # no placed host (a switch-only capture)
            continue
        nodes = sorted({h for c in parse_topology_conf(out.text) if c.nodes for h in c.nodes})
        slurm = _loaded(tmp_path, path.stem, nodes, out.text)
        _check_against_locality(loc, out.text, slurm)
        _check_block_and_yaml(loc, fabric.pk, set(nodes))
        loaded.append((path.name, len(nodes), max(v["level"] for v in slurm.values())))
    by = {name: (n, top) for name, n, top in loaded}
    # Selene: 469 hosts; the top level is 2 (leaf, spine, core), MLG01-04 under its spine
    assert by["selene_compute.ibnetdiscover.txt.gz"] == (469, 2)
    assert len(loaded) >= 5, loaded


def test_selene_management_leaf_keeps_its_spine(realdata, db, tmp_path, committed_signals):
    text = gzip.decompress(
        (realdata / "ibnetdiscover/selene_compute.ibnetdiscover.txt.gz").read_bytes()
    ).decode()
    fabric = import_topology_text("selene", text, filename="selene.compute.txt").fabric
    out = export(build_locality([fabric]), "slurm-tree")
    nodes = sorted({h for c in parse_topology_conf(out.text) if c.nodes for h in c.nodes})
    slurm = _loaded(tmp_path, "selene", nodes, out.text)
    above = {s: v for s, v in slurm.items() if "selene-cache-03" in v["nodes"]}
    assert sorted(v["level"] for v in above.values()) == [0, 1, 2]
    assert any(s.startswith("MF0_MSPINE3-01") for s in above), above.keys()


def test_real_topology_conf_files_read_as_slurmctld_reads_them(realdata, tmp_path):
    refused = []
    for path in sorted((realdata / "slurm_topology").glob("*.conf")):
        text = path.read_text(errors="replace")
        try:
            mine = parse_topology_conf(text, path.name)
        except LocatedError as exc:
            # what Weft refuses, slurmctld refuses: load it with every node it names
            nodes = sorted({h for m in re.finditer(r"Nodes=(\S+)", text) for h in expand(m.group(1))})
            with pytest.raises(AssertionError, match="not a tree"):
                _loaded(tmp_path, path.stem, nodes, text)
            refused.append((path.name, str(exc)))
            continue
        nodes = sorted({h for c in mine if c.nodes for h in c.nodes})
        slurm = _loaded(tmp_path, path.stem, nodes, text)
        assert set(slurm) == {c.name for c in mine if c.kind == "switch"}, path.name
        for c in mine:
            if c.nodes is not None:
                assert slurm[c.name]["nodes"] == set(c.nodes) and slurm[c.name]["level"] == 0, (
                    path.name,
                    c.name,
                )
            if c.switches:
                assert slurm[c.name]["switches"] == c.switches, (path.name, c.name)
    # PSMN's snippet has S-…851e and S-…86a2 each listing the other: a cycle
    assert [name for name, _ in refused] == ["psmn_X5.topology.conf"], refused
