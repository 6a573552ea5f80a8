"""The fabric lab: ibsim + OpenSM + infiniband-diags (under umad2sim) as a library.

``Lab`` runs a simulated fabric; ``netgen`` writes netfiles (fat trees, rail-optimised GPU pods);
``lab.pytest_plugin`` gives the ``lab_factory``/``small_lab`` fixtures and the ``lab`` marker.
"""

from . import netgen
from .core import UMAD2SIM, Lab, LabConsoleError, LabError, LabToolsMissing, check_tools, tools_missing_reason

__all__ = [
    "UMAD2SIM",
    "Lab",
    "LabConsoleError",
    "LabError",
    "LabToolsMissing",
    "check_tools",
    "netgen",
    "tools_missing_reason",
]
