"""Minimal pytrees: tuples, lists and dicts are nodes; everything else a leaf."""

from __future__ import annotations

from typing import Any


def flatten(obj: Any) -> tuple[list[Any], Any]:
    leaves: list[Any] = []
    return leaves, _flatten(obj, leaves)


def _flatten(obj: Any, leaves: list[Any]) -> Any:
    t = type(obj)
    if t is tuple or t is list:
        return (t, tuple(_flatten(x, leaves) for x in obj))
    if t is dict:
        keys = tuple(obj)
        return (dict, keys, tuple(_flatten(obj[k], leaves) for k in keys))
    leaves.append(obj)
    return None


def unflatten(treedef: Any, leaves: list[Any]) -> Any:
    it = iter(leaves)
    return _unflatten(treedef, it)


def _unflatten(treedef: Any, it) -> Any:
    if treedef is None:
        return next(it)
    if treedef[0] is dict:
        return {k: _unflatten(d, it) for k, d in zip(treedef[1], treedef[2])}
    return treedef[0](_unflatten(d, it) for d in treedef[1])


def paths(treedef: Any, prefix: str = "") -> list[str]:
    """Human-readable path of each leaf, in flatten order (for guard messages)."""
    out: list[str] = []
    _paths(treedef, prefix, out)
    return out


def _paths(treedef: Any, prefix: str, out: list[str]) -> None:
    if treedef is None:
        out.append(prefix)
    elif treedef[0] is dict:
        for k, d in zip(treedef[1], treedef[2]):
            _paths(d, f"{prefix}[{k!r}]", out)
    else:
        for i, d in enumerate(treedef[1]):
            _paths(d, f"{prefix}[{i}]", out)
