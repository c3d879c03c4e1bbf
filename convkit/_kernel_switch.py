"""The public switch of convkit's compiled kernels: :class:`kernels` and :func:`kernels_enabled`.

Every compiled kernel of convkit (numba: the least-squares and logistic one-step kernels, the
fused Local-SGD segments, the top-k selections and fused decentralized updates, the
finite-sum steps, the logistic excess-risk quadrature, the exact engine's Local-SGD
recursion) runs only while the switch is on (the default) and numba can be used
(:func:`numba_usable`: installed, and ``CONVKIT_NO_NUMBA`` unset).  Switched off, every call
takes the generic array-API path, whose numbers agree with the compiled ones to rounding
(each kernel's tests say how closely).

The switch is process-wide (the engines run replicate blocks on threads of this process,
which read it too), and works as a call and as a context manager, like
``torch.set_grad_enabled``::

    import convkit as ck
    ck.kernels(enabled=False)          # from now on, until switched on again
    with ck.kernels(enabled=False):    # this block only: the previous setting comes back
        ...

:func:`convkit.simulate` and :func:`convkit.exact.expected_error` read the switch once, into
their run plan (:mod:`convkit.plan`), and Dask workers apply the plan's setting to their parts.

Every compiled kernel is built in one place, :func:`compiled`: ``compiled(name, builder)``
calls ``builder()`` (which imports numba and compiles) the first time ``name`` is asked for,
under a lock, and returns the same object afterwards; it returns None while the switch is off
or numba cannot be used.  No other module keeps a cache of compiled kernels
(``tests/test_compiled_cache.py`` scans the package for one).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

__all__ = ["compiled", "kernels", "kernels_enabled", "numba_usable", "planned_kernels"]

_ENABLED = True

#: the compiled kernels built so far, by name (:func:`compiled`); a test may set an entry to
#: None to send the kernel's callers down their generic path
_BUILT: dict[str, Any] = {}
#: held while a builder runs: one build per name, also when threads ask at once (re-entrant:
#: a builder may ask :func:`compiled` for the kernels it calls)
_BUILD_LOCK = threading.RLock()


#: the kernel setting of the engine call a thread is running (:func:`planned_kernels`)
_RUN = threading.local()


def kernels_enabled() -> bool:
    """Whether the compiled kernels are switched on (numba aside): in a thread running an
    engine call, the call's setting, chosen once in its run plan (:func:`planned_kernels`);
    elsewhere the process-wide switch (:class:`kernels`)."""
    run = getattr(_RUN, "enabled", None)
    return _ENABLED if run is None else run


@contextmanager
def planned_kernels(enabled: bool) -> Iterator[None]:
    """In this thread, for the ``with`` block, the compiled kernels run as ``enabled`` says,
    whatever the process-wide switch: an engine applies its plan's setting (``plan.kernels``)
    in every thread that runs a part of the call, so that the kernels are chosen once, by the
    plan, and switching :class:`kernels` in another thread meanwhile changes nothing of the
    call.  Nested blocks restore the outer setting."""
    previous = getattr(_RUN, "enabled", None)
    _RUN.enabled = bool(enabled)
    try:
        yield
    finally:
        _RUN.enabled = previous


def numba_usable() -> bool:
    """Whether numba can be used at all: installed, and the environment variable
    ``CONVKIT_NO_NUMBA`` unset (read at each call; the kernels already compiled stay cached)."""
    if os.environ.get("CONVKIT_NO_NUMBA"):
        return False
    return importlib.util.find_spec("numba") is not None


def compiled(name: str, builder: Callable[[], Any], *, switched: bool = True) -> Any:
    """The compiled kernel ``name``: ``builder()`` the first time, the same object afterwards.

    ``builder`` takes no argument, imports numba and returns the compiled kernel (a
    dispatcher, or any object holding several); it runs once per process and name, under a
    lock, so that threads asking at once wait for the one build (a thread seeing no kernel
    while another compiles would take the generic path, whose rounding differs).  Returns
    None, building nothing, when numba cannot be used (:func:`numba_usable`) or, for a kernel
    that obeys the switch (``switched=True``, every kernel but the exact engine's, which its
    ``use_numba`` argument governs), while ``convkit.kernels`` is off.  ``name`` is the
    kernel's module and function, e.g. ``"_kernels.ls_step"``.
    """
    if switched and not kernels_enabled():
        return None
    try:
        return _BUILT[name]
    except KeyError:
        pass
    if not numba_usable():
        return None
    with _BUILD_LOCK:
        if name not in _BUILT:
            _BUILT[name] = builder()
        return _BUILT[name]


class kernels:
    """Switch convkit's compiled kernels on (``enabled=True``, the default state) or off.

    Called, it sets the process-wide switch; used as a context manager, the setting it made
    lasts for the ``with`` block and the previous one is restored on exit (also on an
    exception).

    Parameters
    ----------
    enabled : bool
        ``True``: the compiled kernels run where they apply (numba installed, NumPy arrays of
        the right dtype and layout); ``False``: every call takes the generic path.
    """

    #: :func:`compiled`, the one cache of compiled kernels (``convkit.kernels.compiled(name,
    #: builder)``)
    compiled = staticmethod(compiled)

    def __init__(self, enabled: bool = True) -> None:
        global _ENABLED
        if not isinstance(enabled, bool):
            raise TypeError(f"kernels(enabled=...) must be True or False, got {enabled!r}")
        self.enabled = enabled
        self.previous = _ENABLED
        _ENABLED = enabled

    def __enter__(self) -> kernels:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        global _ENABLED
        _ENABLED = self.previous

    def __repr__(self) -> str:
        return f"kernels(enabled={self.enabled})"
