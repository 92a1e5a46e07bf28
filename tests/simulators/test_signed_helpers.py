"""Helpers that carry one signature compile nothing at import, compile once (not once per
constant) when the engine calling them compiles, and stay uncompiled when it loads from the cache."""

import importlib.util
import textwrap

SOURCE = textwrap.dedent(
    """
    import numba
    from simulators._kernels import SignedHelpers

    HELPERS = SignedHelpers()

    @HELPERS.njit(numba.int64(numba.int64, numba.int64))
    def add(a, b):
        return a + b

    @numba.njit(cache=True)
    def engine(x):
        return add(x, 1) + add(x, 2) + add(x, 3)

    @numba.njit(cache=True)
    def unsigned_engine(x):
        return plain(x, 1) + plain(x, 2) + plain(x, 3)

    @numba.njit(cache=True)
    def plain(a, b):
        return a + b
    """
)


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_helpers_compile_once_when_their_engine_compiles_and_not_when_it_is_cached(tmp_path):
    path = tmp_path / "kernels_under_test.py"  # numba caches it in tmp_path/__pycache__
    path.write_text(SOURCE)
    first = _load(path, "kernels_first")
    assert not first.add.overloads  # nothing compiled at import
    first.unsigned_engine(10)
    assert len(first.plain.overloads) == 3  # the premise: unsigned, one compilation per constant
    first.HELPERS.before(first.engine)
    assert first.engine(10) == 3 * 10 + 1 + 2 + 3
    assert len(first.add.overloads) == 1

    again = _load(path, "kernels_again")  # as a new process finds the cache
    again.HELPERS.before(again.engine)
    assert again.engine(10) == 36
    assert not again.add.overloads  # the engine came whole from the cache
