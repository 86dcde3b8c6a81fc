"""Which cost table the compiler decides with (`passes/cost_model.py`):
`$LOWERING_COST_TABLE`, else the cache directory's calibrated one (what
`python -m lowering.calibrate` writes), else the one the package ships for
this machine's kind (the nearest kind's where none was measured on it)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from passes import cost_model as cm
from runtime import cpu, disk_cache

TABLE_NAME = "cost_table.json"


def machine_name() -> str:
    """The machine kind a table is measured on: CPU, cores, vector bits."""
    import llvmlite.binding as llvm

    return f"{llvm.get_host_cpu_name()}-{os.cpu_count()}c-{cpu.vector_bits()}bit"


def table_for_process() -> cm.CostTable:
    """The table compiled programs use. One that does not load is reported
    (a warning) and the shipped one used instead."""
    path = os.environ.get("LOWERING_COST_TABLE")
    p = Path(path) if path else disk_cache.directory_from_env() / TABLE_NAME
    if p.is_file():
        try:
            return cm.CostTable.load(p)
        except (OSError, ValueError) as e:
            warnings.warn(f"lowering: cost table {p} not used ({e}); using the shipped one",
                          RuntimeWarning, stacklevel=2)
    return cm.shipped(machine_name())
