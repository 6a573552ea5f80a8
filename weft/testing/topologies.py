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
