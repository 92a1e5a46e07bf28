"""Everything that predicts what a system does. No Optuna and no Ray in here."""

from simulators._errors import CatalogError, DseError, PlanError, SpecError

__all__ = ["CatalogError", "DseError", "PlanError", "SpecError"]
