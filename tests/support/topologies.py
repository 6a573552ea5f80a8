"""Topology texts for tests."""

#: A small ibnetdiscover fat tree: spine-1, leaf-1/leaf-2 and three CAs on two hosts (host001 has
#: two), 4x HDR links; 3 switches, 3 CAs, 5 links, 10 ports.
BASE = """
Switch 8 "spine" # "spine-1"
[1] "leaf1"[7]
[2] "leaf2"[7]

Switch 8 "leaf1" # "leaf-1" enhanced port 0 lid 2 lmc 0
[1] "h1"[1] # "host001 mlx5_0" lid 10 4xHDR
[2] "h2"[1] # "host001 mlx5_1" lid 11 4xHDR
[7] "spine"[1] # "spine-1" lid 1 4xHDR

Switch 8 "leaf2" # "leaf-2" enhanced port 0 lid 3 lmc 0
[1] "h3"[1] # "host002 mlx5_0" lid 12 4xHDR
[7] "spine"[2] # "spine-1" lid 1 4xHDR

Hca 1 "h1" # "host001 mlx5_0"
[1] "leaf1"[1] # lid 10 lmc 0 "leaf-1" lid 2 4xHDR

Hca 1 "h2" # "host001 mlx5_1"
[1] "leaf1"[2] # lid 11 lmc 0 "leaf-1" lid 2 4xHDR

Hca 1 "h3" # "host002 mlx5_0"
[1] "leaf2"[1] # lid 12 lmc 0 "leaf-2" lid 3 4xHDR
"""


def _rails_text() -> str:
    spine, leaves = "0002c90200000100", ["0002c90200000001", "0002c90200000002"]

    def ca(host: int, rail: int) -> tuple[str, str, int]:
        node = f"0002c9030000{host:02d}{rail:01d}0"
        return node, node[:-1] + "1", 10 + 2 * (host - 1) + rail  # node GUID, port GUID, LID

    def head(guid: str, devid: str) -> str:
        return f"\nvendid=0x2c9\ndevid={devid}\nsysimgguid=0x{guid}\n"

    out = head(spine, "0xcf08") + f"switchguid=0x{spine}({spine})\n"
    out += f'Switch\t8 "S-{spine}"\t\t# "spine-1" enhanced port 0 lid 1 lmc 0\n'
    for r, leaf in enumerate(leaves):
        out += f'[{r + 1}]\t"S-{leaf}"[8]\t\t# "rail{r}-leaf" lid {2 + r} 4xHDR\n'
    for r, leaf in enumerate(leaves):
        out += head(leaf, "0xcf08") + f"switchguid=0x{leaf}({leaf})\n"
        out += f'Switch\t8 "S-{leaf}"\t\t# "rail{r}-leaf" enhanced port 0 lid {2 + r} lmc 0\n'
        for h in (1, 2):
            node, port, lid = ca(h, r)
            out += f'[{h}]\t"H-{node}"[1]({port})\t\t# "host00{h} mlx5_{r}" lid {lid} 4xHDR\n'
        out += f'[8]\t"S-{spine}"[{r + 1}]\t\t# "spine-1" lid 1 4xHDR\n'
    for h in (1, 2):
        for r, leaf in enumerate(leaves):
            node, port, lid = ca(h, r)
            out += head(node, "0x101b") + f"caguid=0x{node}\n"
            out += f'Ca\t1 "H-{node}"\t\t# "host00{h} mlx5_{r}"\n'
            out += f'[1]({port})\t"S-{leaf}"[{h}]\t\t# lid {lid} lmc 0 "rail{r}-leaf" lid {2 + r} 4xHDR\n'
    return out


#: A rail pair in full ibnetdiscover form (node and port GUIDs, LIDs): spine-1 (LID 1) over
#: rail0-leaf (LID 2) and rail1-leaf (LID 3); host001 and host002 each with mlx5_0 on rail0-leaf
#: and mlx5_1 on rail1-leaf (port h of the leaf), 4x HDR. CA ``host00h mlx5_r``: node GUID
#: ``0x0002c9030000<hh><r>0``, port GUID the same ending in 1, LID ``10 + 2 (h - 1) + r``.
#: 3 switches, 4 CAs, 6 links.
RAILS = _rails_text()
