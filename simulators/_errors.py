"""One error family for the whole tool (STYLE 6).

Every error names the field, the value and what is allowed; the CLI prints it as one line and
exits with status 2. Subclasses also inherit the matching builtin so callers can catch either.
"""


class DseError(Exception):
    """Base of every error dse raises on purpose."""


class SpecError(DseError, ValueError):
    """A study spec field holds a value that is not allowed."""


class CatalogError(DseError, LookupError):
    """A name (model, GPU, metric, sampler...) is not in its catalogue."""


class PlanError(DseError, ValueError):
    """A parallel plan cannot run: it does not divide the model or the GPUs."""


class WorkloadFormatError(DseError, ValueError):
    """A workload file (SimAI/AICB text) or a value bound for one breaks the format."""
