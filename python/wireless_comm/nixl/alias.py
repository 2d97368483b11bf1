"""The opt-in alias: registers this package as `nixl` (with nixl._api, nixl._bindings and
nixl._utils) in sys.modules, so `import nixl._api` finds wcomm's surface, but only when no real
NIXL can be imported: a NIXL that is installed always wins.

    python3 -m wireless_comm.nixl.alias app.py [args]     # app.py runs with the alias
    python3 -m wireless_comm.nixl.alias -m package.mod    # the same for a module
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import runpy
import sys
from typing import Optional

log = logging.getLogger("wireless_comm.nixl")
_SUBMODULES = ("_api", "_bindings", "_utils")


def real_nixl_spec() -> Optional[importlib.machinery.ModuleSpec]:
    """The spec of a real NIXL on sys.path, or None (our own alias does not count)."""
    mod = sys.modules.get("nixl")
    if mod is not None:
        return None if getattr(mod, "__wcomm_alias__", False) else mod.__spec__
    try:
        return importlib.util.find_spec("nixl")
    except (ImportError, ValueError):
        return None


def install_alias() -> bool:
    """True when `nixl` now names wireless_comm.nixl (or already did); False, leaving
    everything as it was, when a real NIXL is installed."""
    spec = real_nixl_spec()
    if spec is not None:
        log.info("a real NIXL is installed (%s): the wireless_comm.nixl alias stays off", spec.origin)
        return False
    pkg = importlib.import_module("wireless_comm.nixl")
    pkg.__wcomm_alias__ = True
    sys.modules["nixl"] = pkg
    for sub in _SUBMODULES:
        sys.modules[f"nixl.{sub}"] = importlib.import_module(f"wireless_comm.nixl.{sub}")
    return True


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if not install_alias():
        print("wireless_comm.nixl.alias: a real NIXL is installed; running with it", file=sys.stderr)
    if argv[0] == "-m":
        if len(argv) < 2:
            print("wireless_comm.nixl.alias: -m needs a module name", file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))  # as `python3 app.py` does
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
