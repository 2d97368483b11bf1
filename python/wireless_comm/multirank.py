"""``python -m wireless_comm.multirank``: V0.1's multirank tool, run by wcomm's C++ ``wcomm
multirank`` (the executable this package ships in wireless_comm/_bin).

The command line is V0.1's (global options, then ``responder`` or ``initiator [options]``),
plus wcomm's ``--local-ranks N`` (every rank on this host) and the initiator's ``--reduce``,
``--dtype`` and ``--algorithm``. Progress goes to stderr; the report to ``--output`` or stdout.
See docs/collectives.md.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Optional, Sequence

from .benchmark import find_wcomm

_PROG = "python -m wireless_comm.multirank"


def run_wcomm(prog: str, wcomm_args: Sequence[str]) -> int:
    """Runs the shipped `wcomm` with these arguments (stdin, stdout and stderr are this
    process's) and returns its exit status. A terminal's Ctrl-C reaches wcomm too; this
    process passes a SIGINT of its own on and waits for wcomm to stop its work."""
    wcomm = find_wcomm()
    if wcomm is None:
        print(f"{prog}: error: the wcomm executable was not found (this package ships one in "
              f"wireless_comm/_bin; reinstall with scripts/install-python.sh, or set WCOMM_CLI)", file=sys.stderr)
        return 1
    process = subprocess.Popen([wcomm, *wcomm_args])
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            process.send_signal(signal.SIGINT)  # a second one is harmless if the terminal sent it too


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    return run_wcomm(_PROG, ["multirank", *args])


if __name__ == "__main__":
    sys.exit(main())
