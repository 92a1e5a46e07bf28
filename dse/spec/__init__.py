"""The spec file: its fields, how it is read and bounded, and the one-line errors it gives."""

from dse.spec.study import DIRECTIONS, SAMPLERS, Study, knob_values, load_study, parse_study

__all__ = ["DIRECTIONS", "SAMPLERS", "Study", "knob_values", "load_study", "parse_study"]
