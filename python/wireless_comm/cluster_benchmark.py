"""``python -m wireless_comm.cluster_benchmark {launch | worker} ...``: V0.1's cluster launcher,
run by wcomm's C++ ``wcomm cluster`` (the executable this package ships in wireless_comm/_bin).

``launch --config F [--dry-run] [--output F] [--timeout S]`` plus wcomm's ``--launcher ssh |
slurm | mpirun``, ``--hostfile`` and ``--launcher-arg``; ``worker --config F --node-id ID
[--sample-interval S]`` is what a launch runs on each node over SSH (V0.1's remote command,
``cd <workdir> && PYTHONPATH=src <python> -m wireless_comm.cluster_benchmark worker ...``).
See docs/cluster.md.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from .multirank import run_wcomm

_PROG = "python -m wireless_comm.cluster_benchmark"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("launch", "worker", "-h", "--help"):
        print(f"usage: {_PROG} {{launch,worker}} ...  (see {_PROG} launch --help)", file=sys.stderr)
        return 2
    return run_wcomm(_PROG, ["cluster", *args])


if __name__ == "__main__":
    sys.exit(main())
