"""wireless_comm.nixl: NIXL's Python API (nixl._api, nixl._bindings, nixl._utils) over wcomm's
transfer engine, for host memory, so code written against NIXL runs where NIXL is not installed.

    from wireless_comm.nixl import nixl_agent, nixl_agent_config

or, for code that imports `nixl` itself, opt in to the alias (it never hides a real NIXL):

    import wireless_comm.nixl
    wireless_comm.nixl.install_alias()          # nixl, nixl._api, nixl._bindings, nixl._utils
    python3 -m wireless_comm.nixl.alias app.py  # runs app.py with the alias installed

docs/transfer.md, "Coming from NIXL": what maps, what differs, what is refused and why.
"""

from . import _api, _bindings, _utils  # noqa: F401 (nixl._api etc. for the alias)
from ._api import DEFAULT_COMM_PORT, nixl_agent, nixl_agent_config
from ._handles import nixl_prepped_dlist_handle, nixl_xfer_handle
from .alias import install_alias, real_nixl_spec

__all__ = ["DEFAULT_COMM_PORT", "install_alias", "nixl_agent", "nixl_agent_config", "nixl_prepped_dlist_handle",
           "nixl_xfer_handle", "real_nixl_spec"]
