"""A GPU agent's report (nvidia-smi -q -x XML) and the request body that carries it, for the pool agent API tests."""

from __future__ import annotations

TOPO = "\tGPU0\tGPU1\tmlx5_0\tmlx5_1\nGPU0\t X \tNV18\tPIX\tSYS\nGPU1\tNV18\t X \tSYS\tPIX\n"
XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log><driver_version>550.54</driver_version><attached_gpus>2</attached_gpus>
<gpu id="00000000:07:00.0"><product_name>NVIDIA H100</product_name><uuid>GPU-aaa</uuid><minor_number>0</minor_number>
<fb_memory_usage><total>81559 MiB</total><reserved>479 MiB</reserved><used>4 MiB</used><free>81075 MiB</free></fb_memory_usage>
<gpu_recovery_action>None</gpu_recovery_action></gpu>
<gpu id="00000000:0f:00.0"><product_name>NVIDIA H100</product_name><uuid>GPU-bbb</uuid><minor_number>1</minor_number>
<fb_memory_usage><total>81559 MiB</total><used>17592186044415 MiB</used><free>81075 MiB</free></fb_memory_usage>
<gpu_recovery_action>Reset</gpu_recovery_action></gpu>
</nvidia_smi_log>
"""


def body(**kw) -> dict:
    """The agent's POST body for ``host001``: :data:`XML` and :data:`TOPO`, overridden by ``kw``."""
    return {"host": "host001", "nvidia_smi_xml": XML, "topo": TOPO, **kw}
