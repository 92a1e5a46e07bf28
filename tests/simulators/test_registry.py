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


def test_a_catalogue_over_a_base_keeps_the_base_and_refuses_its_names():
    from pydantic import BaseModel

    from simulators._registry import catalog_of

    class Entry(BaseModel):
        name: str
        aliases: tuple[str, ...] = ()
        size: int

    base = catalog_of([{"name": "a", "size": 1}], Entry, "thing", "base.yaml")
    both = catalog_of([{"name": "b", "aliases": ["bee"], "size": 2}], Entry, "thing", "user.yaml", base=base)
    assert list(both) == ["a", "b"] and both.lookup("BEE", "f").size == 2 and list(base) == ["a"]
    with pytest.raises(CatalogError, match=r"^user\.yaml entry 0 \(x\): thing 'A' is registered twice"):
        catalog_of([{"name": "x", "aliases": ["A"], "size": 3}], Entry, "thing", "user.yaml", base=base)
    with pytest.raises(CatalogError, match=r"^user\.yaml entry 1 \(c\): size: required field is missing$"):
        catalog_of([{"name": "b", "size": 2}, {"name": "c"}], Entry, "thing", "user.yaml")
    with pytest.raises(CatalogError, match=r"^user\.yaml: holds dict; allowed: a list of thing mappings$"):
        catalog_of({"name": "b"}, Entry, "thing", "user.yaml")
