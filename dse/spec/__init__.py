"""The spec file: its fields, how it is read and bounded, and the one-line errors it gives."""

from dse.spec.fields import SAMPLERS, knob_values
from dse.spec.metrics import DIRECTIONS
from dse.spec.study import MODES, Study, load_study, parse_study

__all__ = ["DIRECTIONS", "MODES", "SAMPLERS", "Study", "knob_values", "load_study", "parse_study"]
