"""dse: design-space exploration for distributed AI training and serving.

Importing dse loads no Ray, no plotting and compiles no kernels; those load where used.
"""

from dse.errors import CatalogError, DseError, PlanError, SpecError

__all__ = ["CatalogError", "DseError", "PlanError", "SpecError"]
__version__ = "0.1.0"
