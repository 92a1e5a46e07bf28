"""`training.pipeline_layouts`: one Megatron pipeline layout per (pp, vpp) shape, refused in one
line naming the field when it cannot be a layout of the model or of a searched shape."""

import pytest

from dse.cli.commands import main
from dse.errors import DseError
from dse.spec import load_study
from dse.study import resolve_study
from tests.conftest import FOUR_BY_THREE, LAYOUTS_SPEC

SPEC = LAYOUTS_SPEC
ENTRY = f"{{pp: 4, vpp: 3, layers: {FOUR_BY_THREE}}}"  # the (4, 3) layout, as the text has it


def error_of(write_spec, text):
    with pytest.raises(DseError) as err:
        resolve_study(load_study(write_spec(text)))
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_spec_with_layouts_resolves_and_keeps_them_by_shape(write_spec):
    settings = resolve_study(load_study(write_spec(SPEC))).study.training
    assert settings.layout_for(4, 3) == (1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1)
    assert settings.layout_for(2, 1) == (12, 20)
    assert settings.layout_for(4, 1) is None and settings.layout_for(2, 3) is None


@pytest.mark.parametrize(
    "old,new,message",
    [
        (
            "layers: [12, 20]",
            "layers: [32]",
            "training.pipeline_layouts[1]: layers lists 1 virtual stages; allowed: pp*vpp=2*1=2 counts",
        ),
        (
            "layers: [12, 20]}",
            "layers: [12, 20]}\n    - {pp: 2, vpp: 1, layers: [16, 16]}",
            "training.pipeline_layouts: entries 1 and 2 both give pp=2, vpp=1; allowed: one layout per pipeline shape",
        ),
        (
            "layers: [12, 20]",
            "layers: [12, 19]",
            "training.pipeline_layouts[1]: pipeline_layout holds 31 layers; llama3-8b has 32",
        ),
        ("layers: [12, 20]", "layers: [0, 32]", "training.pipeline_layouts[1].layers[0]: 0:"),
        (
            "{pp: 2, layers: [12, 20]}",
            "{pp: 2, vpp: 2, layers: [8, 8, 8, 8]}",
            "training.pipeline_layouts[1]: pp=2, vpp=2 is no pipeline shape of the search; allowed: pp in "
            "search.pp (1, 2, 4), vpp in search.vpp (1, 3)",
        ),
        (
            "{pp: 2, layers: [12, 20]}",
            "{pp: 1, vpp: 3, layers: [12, 10, 10]}",
            "training.pipeline_layouts[1]: vpp=3 needs pp > 1",
        ),
        (
            "  seq_len: 4096\n",
            "  seq_len: 4096\n  pipeline_layout: [16, 16]\n",
            "training.pipeline_layouts: cannot be combined with pipeline_layout; allowed: one of them",
        ),
        (
            "recompute: [none]",
            "recompute: [none]\n  pipeline_split: [embedding+loss]",
            "search.pipeline_split: a plan with a layout of training.pipeline_layouts splits by it alone",
        ),
        (
            "{pp: 2, layers",
            "{pp: 2, vp: 1, layers",
            "training.pipeline_layouts[1].vp: unknown field; allowed: pp, vpp, layers",
        ),
    ],
)
def test_a_bad_layout_is_refused_in_one_line_naming_the_field(write_spec, old, new, message):
    assert old in SPEC
    assert error_of(write_spec, SPEC.replace(old, new)).startswith(message)


def test_without_its_layout_the_shape_is_refused_and_with_it_admitted(write_spec):
    """vpp 3 fits no pp of the search by any split; the (4, 3) layout alone admits it."""
    text = SPEC.replace(f"    - {ENTRY}\n", "")
    assert error_of(write_spec, text).startswith("search.vpp: 3 chunks per stage fit no pp and pipeline_split")
    resolve_study(load_study(write_spec(SPEC)))


def test_the_cli_exits_2_with_the_fields_line(write_spec, capsys):
    spec = write_spec(SPEC.replace("layers: [12, 20]", "layers: [12, 19]"))
    assert main(["simulate", str(spec), "--set", "tp=1", "--set", "pp=2", "--set", "vpp=1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "training.pipeline_layouts[1]: pipeline_layout holds 31 layers" in err
