"""``python -m wireless_comm.experiment_sweep --config F --output-dir D ...``: V0.1's experiment
sweep (suites scheduler, ring, broadcast, chunk, p2p, p2p-knee, p2p-confirm; one cluster launch
per cell in ``random.Random(seed).shuffle`` order; summary.json), run by wcomm's C++
``wcomm cluster sweep``, which also resumes an interrupted sweep and draws summary.html.
See docs/cluster.md.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from .multirank import run_wcomm

_PROG = "python -m wireless_comm.experiment_sweep"


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_wcomm(_PROG, ["cluster", "sweep", *args])


if __name__ == "__main__":
    sys.exit(main())
