"""Serving: request streams, replica iteration costs, schedulers and routing, capacity search."""

from simulators.serving._capacity import Capacity, capacity_search
from simulators.serving._cost import MOE_PARALLEL, ReplicaCost, replica_cost
from simulators.serving._datasets import Dataset, get_dataset
from simulators.serving._deployment import SLO, Deployment, Pool, ServingResult, kv_transfer_s, simulate_deployment
from simulators.serving._lengths import empirical, fixed, geometric, uniform, zipf
from simulators.serving._profile import apply_profile
from simulators.serving._profile_files import VidurProfile, load_vidur_profile
from simulators.serving._requests import ARRIVALS, Requests, TraceData, load_trace, make_requests
from simulators.serving._routers import ROUTERS, Router, get_router, register_router
from simulators.serving._schedulers import SCHEDULERS, Scheduler, get_scheduler, register_scheduler
from simulators.serving._speculative import Speculation

__all__ = [
    "MOE_PARALLEL",
    "ARRIVALS",
    "ROUTERS",
    "SCHEDULERS",
    "SLO",
    "Speculation",
    "Capacity",
    "Dataset",
    "Deployment",
    "Pool",
    "ReplicaCost",
    "Requests",
    "Router",
    "Scheduler",
    "ServingResult",
    "TraceData",
    "VidurProfile",
    "apply_profile",
    "capacity_search",
    "empirical",
    "fixed",
    "geometric",
    "get_dataset",
    "get_router",
    "get_scheduler",
    "kv_transfer_s",
    "load_trace",
    "load_vidur_profile",
    "make_requests",
    "register_router",
    "register_scheduler",
    "replica_cost",
    "simulate_deployment",
    "uniform",
    "zipf",
]
