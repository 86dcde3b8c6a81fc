"""Minimal pytrees, as JAX's: tuples, lists, dicts and namedtuples are nodes (a
namedtuple keeps its type: numpy 2's `SVDResult` comes back an `SVDResult`),
and so are the container types registered with `register_node` or
`register_dataclass`; everything else is a leaf."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

# registered container type -> (flatten: obj -> (aux, children), unflatten: (aux, children) -> obj)
_NODES: dict[type, tuple[Callable[[Any], tuple[Any, tuple]], Callable[[Any, tuple], Any]]] = {}


def register_node(cls: type, flatten: Callable[[Any], tuple[Any, tuple]],
                  unflatten: Callable[[Any, tuple], Any]) -> None:
    """Make `cls` a pytree node: `flatten(obj)` gives (static aux data,
    children), `unflatten(aux, children)` rebuilds it (JAX's
    `register_pytree_node`)."""
    _NODES[cls] = (flatten, unflatten)


def register_dataclass(cls: type) -> type:
    """A dataclass as a pytree node over its fields (usable as a decorator)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    names = tuple(f.name for f in dataclasses.fields(cls))
    register_node(cls, lambda o: (names, tuple(getattr(o, n) for n in names)),
                  lambda aux, ch: cls(**dict(zip(aux, ch))))
    return cls


def _is_namedtuple(t: type) -> bool:
    return issubclass(t, tuple) and t is not tuple and hasattr(t, "_fields")


def flatten(obj: Any) -> tuple[list[Any], Any]:
    leaves: list[Any] = []
    return leaves, _flatten(obj, leaves)


def _flatten(obj: Any, leaves: list[Any]) -> Any:
    t = type(obj)
    if t is tuple or t is list or _is_namedtuple(t):
        return (t, tuple(_flatten(x, leaves) for x in obj))
    if t is dict:
        keys = tuple(obj)
        return (dict, keys, tuple(_flatten(obj[k], leaves) for k in keys))
    node = _NODES.get(t)
    if node is not None:
        aux, children = node[0](obj)
        return (t, aux, tuple(_flatten(x, leaves) for x in children))
    leaves.append(obj)
    return None


def unflatten(treedef: Any, leaves: list[Any]) -> Any:
    it = iter(leaves)
    return _unflatten(treedef, it)


def _unflatten(treedef: Any, it) -> Any:
    if treedef is None:
        return next(it)
    t = treedef[0]
    if t is dict:
        return {k: _unflatten(d, it) for k, d in zip(treedef[1], treedef[2])}
    if t in _NODES and len(treedef) == 3:
        return _NODES[t][1](treedef[1], tuple(_unflatten(d, it) for d in treedef[2]))
    if _is_namedtuple(t):
        return t(*[_unflatten(d, it) for d in treedef[1]])
    return t(_unflatten(d, it) for d in treedef[1])


def paths(treedef: Any, prefix: str = "") -> list[str]:
    """Human-readable path of each leaf, in flatten order (for guard messages)."""
    out: list[str] = []
    _paths(treedef, prefix, out)
    return out


def _paths(treedef: Any, prefix: str, out: list[str]) -> None:
    if treedef is None:
        out.append(prefix)
        return
    t = treedef[0]
    if t is dict:
        for k, d in zip(treedef[1], treedef[2]):
            _paths(d, f"{prefix}[{k!r}]", out)
    elif t in _NODES and len(treedef) == 3:
        names = treedef[1] if isinstance(treedef[1], tuple) and len(treedef[1]) == len(treedef[2]) \
            and all(isinstance(n, str) for n in treedef[1]) else None
        for i, d in enumerate(treedef[2]):
            _paths(d, f"{prefix}.{names[i]}" if names else f"{prefix}[{i}]", out)
    elif _is_namedtuple(t):
        for name, d in zip(t._fields, treedef[1]):
            _paths(d, f"{prefix}.{name}", out)
    else:
        for i, d in enumerate(treedef[1]):
            _paths(d, f"{prefix}[{i}]", out)
