"""The network a collective runs on: tiers from the inside out, for alpha-beta cost models.

Level 0 is the scale-up domain (NVLink/NVSwitch, xGMI, ICI...): `domain_gpus` GPUs that reach
each other at up to `scaleup_gbytes_per_s` per GPU, wired as `scaleup_topology` says (a switch, a
full mesh or a torus: simulators/network/_scaleup.py; a group's placement takes its share).
Beyond it every GPU talks through its own NIC (one NIC per GPU, rail-style, as in DGX/HGX
systems). With no further tiers the NICs meet in one non-blocking
fabric (level 1, unbounded). Each `Tier` names a block of GPUs one switch layer joins, from the
inside out (a leaf of 256 GPUs, then a spine of 8192): traffic between GPUs of one block that are
not in one block of the tier inside crosses that tier (level 1 + its index), at the NIC bandwidth
divided by the oversubscription of every tier up to and including it, and pays the NIC latency
plus every one of those tiers' latencies. A network with tiers holds at most its outermost tier's
`group_gpus`.

Bandwidths are line rates per GPU, one direction; the effective rate a collective sees is the line
rate times an efficiency taken from SimAI's analytical bus-bandwidth model (aliyun/SimAI
`astra-sim/system/calbusbw.cc`, ../shared/reference/netsim.md section 2): NVLink SM90 20.6 of 25
GB/s per link (0.824), SM80 20.0 of 25 (0.80); NIC ConnectX-7/BlueField-3 48.5 of 50 GB/s (0.97),
ConnectX-6 23.5 of 25 (0.94). In-switch reduction (NVLS) runs at the effective NVLink rate times
NCCL's `nvlsEfficiency` (NVIDIA/nccl `src/tuning/nvls.cc`: Hopper 0.85, Blackwell 0.74). Each GPU of
the catalogue carries its own three figures (simulators/hardware/gpus.yaml, with sources).

Latencies here are hardware latencies a step adds when it crosses a level (defaults from SimAI's
Spectrum-X topology template, netsim.md section 3: NVSwitch 25 ns, NIC link 500 ns); the software
cost of a step lives with the protocols (`_protocols`). NCCL measured its constants on such
systems, so these overlap them by at most 0.5 us per network step; they are kept so that extra
switch tiers cost extra time.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from simulators._errors import SpecError
from simulators.hardware import GpuSpec
from simulators.hardware._topology import check_topology
from simulators.network._calibration import CollectiveCalibration

# A Network built by hand (not `from_gpu`) defaults to Hopper-class figures.
NVLINK_SM90_EFFICIENCY = 20.6 / 25  # SimAI calbusbw.cc, per NVLink 4 link
NIC_CX7_EFFICIENCY = 48.5 / 50  # SimAI calbusbw.cc, ConnectX-7 / BlueField-3 at 400 Gb/s
NVLS_HOPPER_EFFICIENCY = 0.85  # NCCL nvls.cc nvlsEfficiency
NVSWITCH_LATENCY_S = 25e-9  # SimAI gen_Topo_Template.py Spectrum-X default
NIC_LATENCY_S = 500e-9
TIER_LATENCY_S = 2 * NIC_LATENCY_S  # one more link up to the next switch layer and one down


def _check(field_name: str, value: object, ok: bool, allowed: str) -> None:
    if not ok:
        raise SpecError(f"{field_name}: {value!r} is not allowed; allowed: {allowed}")


def _check_count(field_name: str, value: object, minimum: int = 1) -> None:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= minimum
    _check(field_name, value, ok, f"an integer >= {minimum}")


def _check_real(field_name: str, value: object, *, low: float, high: float = math.inf, open_low: bool) -> None:
    ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if open_low else value >= low) and value <= high
    bounds = f"{'>' if open_low else '>='} {low:g}" + (f" and <= {high:g}" if high < math.inf else "")
    _check(field_name, value, ok, f"a finite number {bounds}")


@dataclass(frozen=True)
class Tier:
    """A switch layer joining blocks of `group_gpus` consecutive GPUs (in global rank order).

    `oversubscription` (>= 1) divides the NIC bandwidth of traffic that crosses this layer, on
    top of the tiers inside; `latency_s` is what a step crossing it adds to the NIC latency.
    """

    group_gpus: int
    oversubscription: float = 1.0
    latency_s: float = TIER_LATENCY_S

    def __post_init__(self) -> None:
        _check_count("tier.group_gpus", self.group_gpus, minimum=2)
        _check_real("tier.oversubscription", self.oversubscription, low=1.0, open_low=False)
        _check_real("tier.latency_s", self.latency_s, low=0.0, open_low=False)


class Levels(NamedTuple):
    """Per-level arrays, index 0 = scale-up domain, 1 = first fabric level, and so on."""

    bytes_per_s: np.ndarray  # effective bandwidth per GPU, one direction
    latency_s: np.ndarray  # hardware latency a step crossing the level adds
    reach_gpus: np.ndarray  # GPUs in one block of the level (inf: the whole network)
    is_scaleup: np.ndarray  # bool: NCCL's NVLink step latencies apply (else its NET ones)
    names: tuple[str, ...]


@dataclass(frozen=True)
class Network:
    """A hierarchical network (see the module docstring). Change one field with
    `dataclasses.replace`, which validates again."""

    name: str
    domain_gpus: int
    scaleup_gbytes_per_s: float
    nic_gbytes_per_s: float
    nvls: bool = False
    tiers: tuple[Tier, ...] = ()
    scaleup_latency_s: float = NVSWITCH_LATENCY_S
    nic_latency_s: float = NIC_LATENCY_S
    scaleup_efficiency: float = NVLINK_SM90_EFFICIENCY
    nic_efficiency: float = NIC_CX7_EFFICIENCY
    nvls_efficiency: float = NVLS_HOPPER_EFFICIENCY  # used only where `nvls`
    # Measured slowdowns of collectives when every group of the step runs at once on the real
    # fabric ((op, ranks, stride, nbytes) -> factor, from a fidelity level above the analytical
    # one); the training model multiplies those collectives' times by them (slowdown_factor).
    # Empty: the tiers alone.
    slowdown: tuple[tuple[tuple[str, int, int, int], float], ...] = ()
    # Measured / modelled collective time by operation, level and message size (nccl-tests on
    # the user's system, `dse calibrate nccl-tests`); None: the model's times as they are.
    calibration: CollectiveCalibration | None = None
    # (op, algorithm) pairs the spec forces (hardware.collective_algorithm); an op not named is
    # `auto`, NCCL's tuner. On the network because every collective of a candidate is priced on
    # it, so the training model, its collectives table and the fidelity levels all see the choice.
    algorithms: tuple[tuple[str, str], ...] = ()
    # How the scale-up domain is wired (`_scaleup.TOPOLOGIES`) and a torus's dims (product =
    # domain_gpus); a switch gives every group the whole per-GPU rate, as before.
    scaleup_topology: str = "switch"
    scaleup_torus_dims: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        _check("network.name", self.name, isinstance(self.name, str) and self.name != "", "a non-empty string")
        _check_count("network.domain_gpus", self.domain_gpus)
        for name in ("scaleup_gbytes_per_s", "nic_gbytes_per_s"):
            _check_real(f"network.{name}", getattr(self, name), low=0.0, open_low=True)
        for name in ("scaleup_latency_s", "nic_latency_s"):
            _check_real(f"network.{name}", getattr(self, name), low=0.0, open_low=False)
        for name in ("scaleup_efficiency", "nic_efficiency", "nvls_efficiency"):
            _check_real(f"network.{name}", getattr(self, name), low=0.0, high=1.0, open_low=True)
        _check("network.nvls", self.nvls, isinstance(self.nvls, bool), "true or false")
        object.__setattr__(self, "scaleup_torus_dims", tuple(self.scaleup_torus_dims))
        problem = check_topology(self.scaleup_topology, self.scaleup_torus_dims, self.domain_gpus)
        _check("network.scaleup_topology", self.scaleup_topology, problem is None, problem or "")
        calibration = self.calibration
        ok = calibration is None or isinstance(calibration, CollectiveCalibration)
        _check("network.calibration", calibration, ok, "a CollectiveCalibration or None")
        tiers = tuple(self.tiers)
        object.__setattr__(self, "tiers", tiers)
        inner = self.domain_gpus
        for i, tier in enumerate(tiers):
            _check(f"network.tiers[{i}]", tier, isinstance(tier, Tier), "a Tier")
            ok = tier.group_gpus > inner and tier.group_gpus % inner == 0
            _check(
                f"network.tiers[{i}].group_gpus",
                tier.group_gpus,
                ok,
                f"a multiple of {inner} greater than {inner} (tiers grow from the inside out and nest)",
            )
            inner = tier.group_gpus
        algorithms = tuple(tuple(pair) for pair in self.algorithms)
        object.__setattr__(self, "algorithms", algorithms)
        for i, pair in enumerate(algorithms):
            ok = len(pair) == 2 and all(isinstance(x, str) and x for x in pair)
            _check(f"network.algorithms[{i}]", pair, ok, "(op, algorithm name)")
        slowdown = tuple(self.slowdown)
        object.__setattr__(self, "slowdown", slowdown)
        for i, entry in enumerate(slowdown):
            ok = isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], tuple) and len(entry[0]) == 4
            _check(
                f"network.slowdown[{i}]",
                entry,
                ok and isinstance(entry[0][0], str),
                "((op, ranks, stride, nbytes), factor)",
            )
            _check_count(f"network.slowdown[{i}].ranks", entry[0][1])
            _check_count(f"network.slowdown[{i}].stride", entry[0][2])
            _check_count(f"network.slowdown[{i}].nbytes", entry[0][3])
            _check_real(f"network.slowdown[{i}].factor", entry[1], low=0.0, open_low=True)

    def algorithm_for(self, op: str) -> str:
        """The algorithm `op` runs with on this network: the forced one, else "auto"."""
        return dict(self.algorithms).get(op, "auto")

    def slowdown_factor(self, op: str, ranks: int, stride: int, nbytes: float) -> float:
        """The measured factor of `op` on that group at `nbytes`: the entry of that size, else of
        the same collective the nearest size on a log scale (a ZeRO-3 bucket of a measured
        gradient reduction, say), else 1 (a collective the level did not see is not slowed)."""
        sizes = [(key[3], factor) for key, factor in self.slowdown if key[:3] == (op, ranks, stride)]
        if not sizes:
            return 1.0
        return min(sizes, key=lambda entry: (abs(math.log(entry[0] / max(nbytes, 1.0))), entry[0]))[1]

    def __hash__(self) -> int:
        return self._hash

    @cached_property
    def _hash(self) -> int:
        """Computed once: networks key the training model's memo tables, hashed on every call."""
        return hash(tuple(getattr(self, f.name) for f in dataclasses.fields(self)))

    @classmethod
    def from_gpu(cls, gpu: GpuSpec, tiers: tuple[Tier, ...] = ()) -> Network:
        """The reference system of a catalogue GPU: its NVLink domain, one NIC per GPU, `tiers`."""
        return cls(
            name=gpu.name,
            domain_gpus=gpu.scaleup_domain_gpus,
            scaleup_gbytes_per_s=gpu.scaleup_gbytes_per_s,
            nic_gbytes_per_s=gpu.nic_gbytes_per_s,  # the catalogue's nic_gbps is gigabits
            nvls=gpu.nvls_efficiency is not None,
            tiers=tuple(tiers),
            scaleup_efficiency=gpu.scaleup_efficiency,
            nic_efficiency=gpu.nic_efficiency,
            nvls_efficiency=gpu.nvls_efficiency or NVLS_HOPPER_EFFICIENCY,
            scaleup_topology=gpu.scaleup_topology,
            scaleup_torus_dims=gpu.scaleup_torus_dims or (),
        )

    @cached_property
    def levels(self) -> Levels:
        return self._build_levels()

    @property
    def max_gpus(self) -> float:
        """The most GPUs the network joins: the outermost tier's block, or inf with no tiers."""
        return float(self.tiers[-1].group_gpus) if self.tiers else math.inf

    @cached_property
    def nvls_bytes_per_s(self) -> float:
        """Effective per-GPU rate of in-switch reduction (NVLS)."""
        return self.scaleup_gbytes_per_s * 1e9 * self.scaleup_efficiency * self.nvls_efficiency

    def _build_levels(self) -> Levels:
        nic = self.nic_gbytes_per_s * 1e9 * self.nic_efficiency
        bw = [self.scaleup_gbytes_per_s * 1e9 * self.scaleup_efficiency]
        lat = [self.scaleup_latency_s]
        reach = [float(self.domain_gpus)]
        names = ["scale-up"]
        if not self.tiers:
            bw, lat, reach, names = bw + [nic], lat + [self.nic_latency_s], reach + [math.inf], names + ["nic"]
        oversubscription, latency = 1.0, self.nic_latency_s
        for i, tier in enumerate(self.tiers):
            oversubscription *= tier.oversubscription
            latency += tier.latency_s
            bw.append(nic / oversubscription)
            lat.append(latency)
            reach.append(float(tier.group_gpus))
            names.append(f"tier{i}")
        arrays = [np.array(x, dtype=float) for x in (bw, lat, reach)]
        scaleup = np.arange(len(bw)) == 0
        for a in (*arrays, scaleup):
            a.setflags(write=False)
        return Levels(*arrays, scaleup, tuple(names))
