"""The cost model: a dated, sourced price book and the cost metrics of a candidate."""

from dse.cost._catalog import GPU_CATALOGUE_TIER, Price, PriceBook, default_price_book, price_book
from dse.cost._metrics import Ownership, bom_ownership, cost_metrics, ownership

__all__ = [
    "GPU_CATALOGUE_TIER",
    "Ownership",
    "bom_ownership",
    "Price",
    "PriceBook",
    "cost_metrics",
    "default_price_book",
    "ownership",
    "price_book",
]
