"""The Weft host agent: ``python -m pools.agent`` (or ``manage.py weft_agent``).

Collects on a GPU host

* ``nvidia-smi -q -x`` (and ``nvidia-smi topo -m``, ``nvidia-smi mig -lgi``/``-lci`` when they
  answer), each run with a timeout in its own process group
  (``fabric.collectors.tools.run_tool``);
* the local HCAs: device name, node GUID, and per port the port GUID (GID index 0's interface id),
  link layer (InfiniBand or Ethernet/RoCE), state and rate, through **pyverbs** (rdma-core's
  Python binding, Debian ``python3-pyverbs``); where pyverbs is missing, raises
  (``PyverbsRDMAError``: no RDMA device or no access) or lists no device, from
  ``/sys/class/infiniband`` (the same facts the kernel exports: ``node_guid``,
  ``ports/N/{state,link_layer,rate,gids/0}``);

and posts them to ``POST /api/pools/agent/`` with ``Authorization: Token <key>`` (a token of a
user with the Operator role or in the "Host agent" group; an agent token is bound to the host of
its first report and refused, 403, for any other: one token per host, see
``pools.services.agents``). Prints the server's JSON answer as its last line; exits 1 when the
server refuses the report (403 another host's token, 413 a report above the server's
``WEFT_AGENT_MAX_BODY_BYTES``, 400 output that does not parse), 2 when nvidia-smi cannot be run.

Pure Python without Django, so it runs from a checkout on a host with only the venv.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from fabric.collectors.tools import ToolError, run_tool

AGENT_VERSION = "1"
SYSFS_ROOT = "/sys/class/infiniband"
_ZERO_GUID = "0x0000000000000000"


def canonical_guid(text: str) -> str:
    """``"0002:c903:00a1:b2c3"`` / ``"0x0002c90300a1b2c3"`` → ``"0x0002c90300a1b2c3"``; "" for
    an empty, unreadable or all-zero GUID (an HCA that has none)."""
    digits = re.sub(r"[^0-9a-fA-F]", "", (text or "").strip().lower().removeprefix("0x"))
    if not digits or len(digits) > 16:
        return ""
    guid = f"0x{int(digits, 16):016x}"
    return "" if guid == _ZERO_GUID else guid


def _port_guid_from_gid(gid: str) -> str:
    """The interface id (last 64 bits) of GID 0: the port GUID on InfiniBand ports."""
    groups = (gid or "").strip().split(":")
    return canonical_guid("".join(groups[-4:])) if len(groups) == 8 else ""


def _rate_from_sysfs(text: str) -> float | None:
    m = re.match(r"^\s*([\d.]+)\s*Gb/sec", text or "")
    return float(m.group(1)) if m else None


def _state_word(text: str) -> str:
    """``"4: ACTIVE"`` (sysfs) or ``"Active (4)"`` (pyverbs) → ``"ACTIVE"``."""
    words = re.findall(r"[A-Za-z_]+", text or "")
    return words[0].upper() if words else ""


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def hcas_from_sysfs(root: str | os.PathLike = SYSFS_ROOT) -> list[dict[str, Any]]:
    """The HCAs under ``root`` (``/sys/class/infiniband``): ``[{"name", "node_guid", "ports":
    [{"port_num", "port_guid", "link_layer", "state", "rate_gbps"}]}]``, sorted by name; [] when
    ``root`` does not exist. A RoCE port's GID 0 is not a port GUID (it is derived from the MAC):
    its ``port_guid`` is left empty."""
    base = Path(root)
    if not base.is_dir():
        return []
    out = []
    for dev in sorted(base.iterdir(), key=lambda p: p.name):
        ports = []
        pdir = dev / "ports"
        for port in sorted(
            pdir.iterdir() if pdir.is_dir() else [], key=lambda p: int(p.name) if p.name.isdigit() else 0
        ):
            if not port.name.isdigit():
                continue
            layer = _read(port / "link_layer") or "Unknown"
            ports.append({
                "port_num": int(port.name),
                "port_guid": _port_guid_from_gid(_read(port / "gids" / "0")) if layer == "InfiniBand" else "",
                "link_layer": layer if layer in ("InfiniBand", "Ethernet") else "Unknown",
                "state": _state_word(_read(port / "state")),
                "rate_gbps": _rate_from_sysfs(_read(port / "rate")),
            })  # fmt: skip
        out.append({"name": dev.name, "node_guid": canonical_guid(_read(dev / "node_guid")), "ports": ports})
    return out


def hcas_from_pyverbs() -> list[dict[str, Any]]:
    """The HCAs pyverbs sees (same shape as :func:`hcas_from_sysfs`).

    Raises:
        ImportError: pyverbs is not installed.
        pyverbs.pyverbs_error.PyverbsError: (incl. ``PyverbsRDMAError``) no RDMA subsystem or a
            device that cannot be opened or queried.
    """
    import pyverbs.device as d

    out = []
    for dev in d.get_device_list():
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        ports = []
        with d.Context(name=name) as ctx:
            attr = ctx.query_device()
            for num in range(1, attr.phys_port_cnt + 1):
                pa = ctx.query_port(num)
                layer = d.translate_link_layer(pa.link_layer)
                guid = ""
                if layer == "InfiniBand":
                    guid = _port_guid_from_gid(str(ctx.query_gid(num, 0)))
                lane = re.match(r"[\d.]+", d.speed_to_str(pa.active_speed) or "")
                width = re.match(r"(\d+)", d.width_to_str(pa.active_width) or "")
                rate = float(lane.group(0)) * int(width.group(1)) if lane and width else None
                ports.append({"port_num": num, "port_guid": guid,
                              "link_layer": layer if layer in ("InfiniBand", "Ethernet") else "Unknown",
                              "state": _state_word(d.port_state_to_str(pa.state)), "rate_gbps": rate})  # fmt: skip
            node_guid = canonical_guid(str(attr.node_guid))
        out.append({"name": name, "node_guid": node_guid, "ports": ports})
    return sorted(out, key=lambda h: h["name"])


def collect_hcas(sysfs_root: str | os.PathLike = SYSFS_ROOT) -> tuple[list[dict[str, Any]], str]:
    """The local HCAs and how they were read (``"pyverbs"`` or ``"sysfs: <why>"``): pyverbs
    first, ``sysfs_root`` when pyverbs is missing, raises or finds no device."""
    try:
        hcas = hcas_from_pyverbs()
    except ImportError as exc:
        why = f"pyverbs not installed ({exc})"
    except Exception as exc:  # PyverbsError/PyverbsRDMAError and whatever a broken device raises
        why = f"pyverbs: {type(exc).__name__}: {exc}"
    else:
        if hcas:
            return hcas, "pyverbs"
        why = "pyverbs found no RDMA device"
    return hcas_from_sysfs(sysfs_root), f"sysfs ({why})"


def collect_gpus(nvidia_smi: str = "nvidia-smi", timeout: float = 60.0) -> dict[str, str]:
    """``{"nvidia_smi_xml", "topo", "mig"}`` from the local nvidia-smi; ``topo``/``mig`` are ""
    when those commands fail (old drivers, no MIG).

    Raises:
        ToolError: ``nvidia-smi -q -x`` could not be run, timed out or exited non-zero.
    """
    res = run_tool([nvidia_smi, "-q", "-x"], timeout=timeout)
    if res.returncode != 0:
        raise ToolError(
            f"nvidia-smi -q -x exited {res.returncode}: {(res.stderr or res.stdout).strip()[:300]}"
        )
    out = {"nvidia_smi_xml": res.stdout, "topo": "", "mig": ""}
    try:
        topo = run_tool([nvidia_smi, "topo", "-m"], timeout=timeout)
        out["topo"] = topo.stdout if topo.returncode == 0 else ""
        if "<current_mig>Enabled</current_mig>" in res.stdout:
            lgi = run_tool([nvidia_smi, "mig", "-lgi"], timeout=timeout)
            lci = run_tool([nvidia_smi, "mig", "-lci"], timeout=timeout)
            out["mig"] = "\n".join(r.stdout for r in (lgi, lci) if r.returncode == 0)
    except ToolError:
        pass
    return out


def build_report(args: argparse.Namespace) -> dict[str, Any]:
    """The JSON body posted to ``/api/pools/agent/`` (see ``AgentReportSerializer``)."""
    if args.xml:
        gpus = {"nvidia_smi_xml": Path(args.xml).read_text(errors="replace"), "topo": "", "mig": ""}
    else:
        gpus = collect_gpus(args.nvidia_smi, args.timeout)
    if args.topo_file:
        gpus["topo"] = Path(args.topo_file).read_text(errors="replace")
    if args.mig_file:
        gpus["mig"] = Path(args.mig_file).read_text(errors="replace")
    hcas, how = collect_hcas(args.sysfs)
    print(f"HCAs read through {how}: {len(hcas)}", file=sys.stderr)
    return {
        "host": args.host,
        "fabric": args.fabric or "",
        **gpus,
        "hcas": hcas,
        "agent_version": AGENT_VERSION,
    }


def post_report(server: str, token: str, report: dict[str, Any], timeout: float = 60.0) -> tuple[int, dict]:
    """POST ``report``; returns (HTTP status, JSON body). Network errors raise ``OSError``."""
    req = urllib.request.Request(
        server.rstrip("/") + "/api/pools/agent/",
        data=json.dumps(report).encode(),
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Authorization": f"Token {token}",
        },  # fmt: skip
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return exc.code, json.loads(body or b"{}")
        except ValueError:
            return exc.code, {"detail": body.decode("utf-8", "replace")[:500]}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m pools.agent", description=__doc__.split("\n\n")[0])
    p.add_argument("--server", default=os.environ.get("WEFT_SERVER", ""), help="Weft base URL ($WEFT_SERVER)")
    p.add_argument(
        "--token", default=os.environ.get("WEFT_AGENT_TOKEN", ""), help="API token ($WEFT_AGENT_TOKEN)"
    )
    p.add_argument("--token-file", help="read the token from this file")
    p.add_argument(
        "--host", default=socket.gethostname().split(".")[0], help="this host's name (default: hostname)"
    )
    p.add_argument("--fabric", help="fabric name, when several fabrics have this host name")
    p.add_argument("--nvidia-smi", default="nvidia-smi", help="nvidia-smi program")
    p.add_argument("--xml", help="post this nvidia-smi -q -x file instead of running nvidia-smi")
    p.add_argument("--topo-file", help="nvidia-smi topo -m output to post with it")
    p.add_argument("--mig-file", help="nvidia-smi mig -lgi/-lci output to post with it")
    p.add_argument("--sysfs", default=SYSFS_ROOT, help="sysfs infiniband class directory (fallback)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per nvidia-smi run and per POST")
    p.add_argument("--interval", type=float, default=0.0, help="report every N seconds (0: once)")
    p.add_argument("--dry-run", action="store_true", help="print the report instead of posting it")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    token = Path(args.token_file).read_text().strip() if args.token_file else args.token
    if not args.dry_run and (not args.server or not token):
        print("--server and --token (or $WEFT_SERVER, $WEFT_AGENT_TOKEN) are needed", file=sys.stderr)
        return 2
    while True:
        try:
            report = build_report(args)
        except (ToolError, OSError) as exc:
            print(f"cannot collect: {exc}", file=sys.stderr)
            code = 2
        else:
            if args.dry_run:
                print(json.dumps(report))
                return 0
            try:
                status, body = post_report(args.server, token, report, args.timeout)
            except OSError as exc:
                status, body = 0, {"detail": f"cannot reach {args.server}: {exc}"}
            print(json.dumps({"status": status, **body}, sort_keys=True))
            code = 0 if status == 200 else 1
        if args.interval <= 0:
            return code
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
