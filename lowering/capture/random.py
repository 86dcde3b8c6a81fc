"""Random draws at run time, from numpy's own generators.

While a function is traced, the generators it can reach (arguments, and
generators in its Python state) are replaced by `TracedGenerator`s, and the
`np.random.*` functions (numpy's global `RandomState`) by wrappers. A draw
whose arguments are concrete (sizes, Python numbers) becomes a graph input
produced on every call by the real generator (`tracer.Draw`), in program
order; so with the same seed a compiled function returns numpy's values and
leaves the generator in numpy's state. A draw from traced arguments
(`rng.normal(mu, sigma)` with traced `mu`, `rng.permutation(x)`), a reseed,
and anything else that touches the generator run eagerly at that point of
the program (a graph break). Draws are constants to `grad`; remat never
recomputes one (they are inputs)."""

from __future__ import annotations

import contextlib
import copy
import threading
from typing import Any

import numpy as np

from .. import pytree
from dialects.dtypes import supported

_current = threading.local()

# numpy.random's functions that draw (module level: methods of the global RandomState)
DRAWS = frozenset("""
beta binomial bytes chisquare choice dirichlet exponential f gamma geometric
gumbel hypergeometric integers laplace logistic lognormal logseries
multinomial multivariate_hypergeometric multivariate_normal negative_binomial
noncentral_chisquare noncentral_f normal pareto permutation poisson power
rand randint randn random random_integers random_sample ranf rayleigh sample
standard_cauchy standard_exponential standard_gamma standard_normal
standard_t triangular uniform vonmises wald weibull zipf
""".split())

# calls that change or read a generator's state without drawing
_EFFECTS = frozenset(["seed", "set_state", "get_state", "shuffle", "permuted", "spawn",
                      "jumped", "__getstate__", "__setstate__"])


def _traced(x) -> bool:
    from .traced import TracedArray

    leaves, _ = pytree.flatten(x)
    return any(isinstance(v, TracedArray) for v in leaves)


def draw(tracer, source: int | None, gen, method: str, args: tuple, kwargs: dict) -> Any:
    """One call of `gen.method(*args, **kwargs)` in the traced program."""
    from .tracer import Draw
    from .traced import TracedArray

    real = getattr(gen, method)
    if method not in DRAWS or _traced((args, kwargs)):
        why = ("a random draw from traced arguments" if method in DRAWS
               else f"{method} on a random generator")
        leaves, tdef = pytree.flatten((args, kwargs))
        traced = [x for x in leaves if isinstance(x, TracedArray)]
        concrete = iter(tracer.graph_break(f"{why} runs eagerly", traced, force=True))
        tracer.trace.replayable = False  # the generator call must run again on every call
        leaves = [next(concrete) if isinstance(x, TracedArray) else x for x in leaves]
        a, k = pytree.unflatten(tdef, leaves)
        return tracer.adopt(real(*a, **k))
    # what the draw makes (shape, dtype, kind): the same call on a copy
    probe = getattr(copy.deepcopy(gen), method)(*args, **kwargs)
    if probe is None or not isinstance(probe, (np.ndarray, np.generic, float, int, bool)):
        tracer.graph_break(f"{method} on a random generator runs eagerly", [], force=True)
        tracer.trace.replayable = False
        return real(*args, **kwargs)
    arr = np.asarray(probe)
    if not supported(arr.dtype):
        tracer.graph_break(f"a random draw of dtype {arr.dtype} runs eagerly", [], force=True)
        tracer.trace.replayable = False
        return real(*args, **kwargs)
    python = type(probe) in (float, int, bool)
    d = Draw(source, method, tuple(args), dict(kwargs), python_float=type(probe) is float)
    return tracer.draw_input(d, arr.shape, arr.dtype,
                             weak=type(probe) if python else None,
                             scalar=python or isinstance(probe, np.generic))


class TracedGenerator:
    """Stands for a `np.random.Generator` / `RandomState` during a trace."""

    __slots__ = ("_t", "_source", "_gen")
    _stands_in = True

    def __init__(self, tracer, source: int | None, gen):
        self._t, self._source, self._gen = tracer, source, gen

    @property
    def __class__(self):  # isinstance(rng, np.random.Generator) holds, as in numpy
        return type(self._gen)

    def __getattr__(self, name: str):
        real = getattr(self._gen, name)
        if not callable(real) or name.startswith("_"):
            if name in ("bit_generator", "_bit_generator"):
                self._t.graph_break("the generator's bit generator is used directly", [], force=True)
                self._t.trace.replayable = False
            return real

        def call(*args, **kwargs):
            return draw(self._t, self._source, self._gen, name, args, kwargs)

        call.__name__ = name
        return call

    def __repr__(self):
        return repr(self._gen)


def _module_function(name: str, original):
    def wrapper(*args, **kwargs):
        tracer = getattr(_current, "tracer", None)
        if tracer is None:
            return original(*args, **kwargs)
        return draw(tracer, None, np.random.mtrand._rand, name, args, kwargs)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = original.__doc__
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


def _maker(name: str, original):
    """A generator made inside the function (`np.random.default_rng()`): its
    draws are concrete, so the function is traced on every call (a graph
    break), which makes a new generator each time as numpy would."""

    def wrapper(*args, **kwargs):
        tracer = getattr(_current, "tracer", None)
        if tracer is not None:
            tracer.graph_break(f"np.random.{name}: a generator made inside the function", [],
                               force=True)
            tracer.trace.replayable = False
        return original(*args, **kwargs)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    return wrapper


_NAMES = sorted((DRAWS | _EFFECTS) & set(dir(np.random)))
_ORIGINAL = {n: getattr(np.random, n) for n in _NAMES}
_ORIGINAL_MAKERS = {n: getattr(np.random, n) for n in ("default_rng",)}
_WRAPPERS = {n: _module_function(n, f) for n, f in _ORIGINAL.items()}
_WRAPPERS.update({n: _maker(n, f) for n, f in _ORIGINAL_MAKERS.items()})
_lock = threading.Lock()
_depth = 0


@contextlib.contextmanager
def random_capture(tracer):
    """`np.random.*` draws go to `tracer` in this thread while it traces."""
    global _depth
    prev = getattr(_current, "tracer", None)
    _current.tracer = tracer
    with _lock:
        if _depth == 0:
            for n, w in _WRAPPERS.items():
                setattr(np.random, n, w)
        _depth += 1
    try:
        yield
    finally:
        _current.tracer = prev
        with _lock:
            _depth -= 1
            if _depth == 0:
                for n, f in {**_ORIGINAL, **_ORIGINAL_MAKERS}.items():
                    setattr(np.random, n, f)
