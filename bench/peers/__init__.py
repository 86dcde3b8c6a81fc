"""The peers: one module each, all behind the small `Peer` protocol of base.py.

`PEERS` lists them in table order; `lowering` expands to one column per
backend (`lowering[numpy]`, `lowering[cpu]`, ...)."""

from __future__ import annotations

from .base import NotExpressible, Peer

PEER_NAMES = ("lowering", "numpy", "numexpr", "numba", "jax", "torch")


def make(name: str) -> list[Peer]:
    """The peer objects for one `--peers` name (lowering gives one per backend)."""
    if name == "lowering":
        from .lowering_peer import lowering_peers

        return lowering_peers()
    if name == "numpy":
        from .numpy_peer import NumpyPeer

        return [NumpyPeer()]
    if name == "numexpr":
        from .numexpr_peer import NumexprPeer

        return [NumexprPeer()]
    if name == "numba":
        from .numba_peer import NumbaPeer

        return [NumbaPeer()]
    if name == "jax":
        from .jax_peer import JaxPeer

        return [JaxPeer()]
    if name == "torch":
        from .torch_peer import TorchPeer

        return [TorchPeer()]
    raise ValueError(f"unknown peer {name!r} (known: {', '.join(PEER_NAMES)})")


__all__ = ["PEER_NAMES", "NotExpressible", "Peer", "make"]
