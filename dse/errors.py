"""The error family of dse (defined in simulators so both packages raise the same classes)."""

from simulators._errors import CatalogError, DseError, PlanError, SpecError

__all__ = ["CatalogError", "DseError", "PlanError", "SpecError"]
