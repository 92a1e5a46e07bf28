import pytest

from simulators._errors import CatalogError
from simulators._registry import Registry


def test_lookup_is_case_insensitive_and_follows_aliases():
    registry = Registry("GPU")
    registry.register("H100-SXM", 1, aliases=("h100",))
    assert registry.lookup("h100-sxm", "gpu") == 1
    assert registry.lookup("H100", "gpu") == 1
    assert list(registry) == ["H100-SXM"]


def test_unknown_name_names_the_field_a_guess_and_the_allowed_names():
    registry = Registry("GPU")
    registry.register("H100-SXM", 1)
    registry.register("H200", 2)
    with pytest.raises(CatalogError) as err:
        registry.lookup("H100-SMX", "hardware.gpu[0]")
    message = str(err.value)
    assert message.startswith("hardware.gpu[0]: 'H100-SMX' is not a known GPU")
    assert "did you mean 'H100-SXM'" in message
    assert message.endswith("allowed: H100-SXM, H200")


def test_registering_a_name_twice_raises():
    registry = Registry("model")
    registry.register("a", 1, aliases=("b",))
    with pytest.raises(CatalogError, match="registered twice"):
        registry.register("B", 2)
