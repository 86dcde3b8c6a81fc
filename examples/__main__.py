"""Run every example: `python -m examples` from the repository root (`make demo`).
Exits non-zero when any example's check against numpy fails."""

import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = ["layernorm", "softmax", "stencil_inplace", "graph_break", "mlp_train"]


def main() -> int:
    sys.path.insert(0, HERE)
    failed = []
    for name in ORDER:
        ns = runpy.run_path(os.path.join(HERE, f"{name}.py"), run_name=f"examples.{name}")
        if not ns["main"]():
            failed.append(name)
        print()
    print(f"{len(ORDER) - len(failed)} of {len(ORDER)} examples match numpy"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
