"""The listing commands (`dse models`, `dse gpus`, `dse topologies`) and the table style every
command shares: cells wrap rather than lose digits on a narrow terminal."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from dse import paths
from dse._text import short
from dse.errors import SpecError


def new_table(title: str, headers: Sequence[str]) -> Table:
    """A table whose cells wrap rather than lose digits when the terminal is narrow."""
    table = Table(title=title)
    for i, header in enumerate(headers):
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold")
    return table


MODEL_COLUMNS = {
    "layers": "layers",
    "hidden": "hidden",
    "ffn_hidden": "ffn",
    "heads": "heads",
    "kv_heads": "kv",
    "vocab": "vocab",
    "gated_mlp": "gated",
    "moe_experts": "experts",
    "max_seq_len": "max seq",
}
GPU_COLUMNS = {
    "bf16_tflops": "bf16",
    "fp8_tflops": "fp8",
    "fp4_tflops": "fp4",
    "hbm_gib": "HBM GiB",
    "hbm_gbytes_per_s": "HBM GB/s",
    "scaleup_gbytes_per_s": "scale-up GB/s",
    "scaleup_domain_gpus": "domain",
    "scaleup_topology": "wiring",
    "nic_gbps": "NIC Gb/s",
    "tdp_w": "TDP W",
    "usd_per_gpu_hour": "$/GPU-h",
    "usd_as_of": "as of",
}


def _catalog_table(title: str, entries, columns: dict[str, str], extra: dict | None = None) -> Table:
    """One row per catalogue entry: its name, `extra` computed columns, then `columns`."""
    extra = extra or {}
    table = new_table(title, ["name", *extra, *columns.values()])
    for entry in entries:
        values = [getattr(entry, c) for c in columns]
        cells = ["-" if v is None else f"{v:g}" if isinstance(v, float) else str(v) for v in values]
        table.add_row(entry.name, *(f(entry) for f in extra.values()), *cells)
    return table


def models(args: argparse.Namespace, console: Console) -> int:
    from simulators.models import model_catalog

    params = {"params": lambda m: f"{m.total_params / 1e9:.1f}"}
    console.print(
        _catalog_table("Model zoo (params from the shapes, billions)", model_catalog().values(), MODEL_COLUMNS, params)
    )
    return 0


def gpus(args: argparse.Namespace, console: Console) -> int:
    from simulators.hardware import gpu_catalog

    title = "GPU catalogue (dense TFLOP/s; bandwidths per GPU, one direction)"
    console.print(_catalog_table(title, gpu_catalog().values(), GPU_COLUMNS))
    return 0


def topologies(args: argparse.Namespace, console: Console) -> int:
    from simulators.hardware import get_gpu
    from simulators.network import (
        Fabric,
        bill_of_materials,
        draw_fabric,
        fabric_graph,
        family_names,
        get_family,
        simai_topology_of,
        write_simai_topology,
    )

    if args.from_simai:
        return _from_simai(args, console)
    if args.simai or args.draw:
        if args.simai:
            paths.output_file(args.simai, "--simai")
            if args.simai.exists() and not args.force:
                raise SpecError(f"--simai: {args.simai} exists; allowed: a new file, or --force to overwrite it")
        fabric = Fabric(args.family, nic_gbps=args.nic_gbps)
        graph = fabric_graph(fabric, get_gpu(args.gpu, "--gpu"), args.num_gpus)
        if args.draw:
            for line in draw_fabric(graph):
                console.print(line)
        if args.simai:
            write_simai_topology(simai_topology_of(graph), args.simai)
            console.print(
                f"wrote {args.simai}: {args.family}, {args.num_gpus} x {args.gpu}, {args.nic_gbps:g} Gb/s NICs"
            )
        return 0
    defaults = Fabric()
    title = "Fabric families (hardware.fabric.family); switches and links per tier at the defaults"
    table = Table(title=f"{title}, for the GPUs shown (at most 1024)")
    for column in ("family", "what it is", "routing", "max GPUs", "GPUs", "switches per tier", "links per tier"):
        table.add_column(column)
    for family in family_names():
        fabric = Fabric(family)
        traits = get_family(family)
        gpus = min(1024, fabric.max_gpus())
        bom = bill_of_materials(fabric, gpus)
        routing = "adaptive" if traits.adaptive_routing else "ECMP"
        tiers, links = " / ".join(map(str, bom.switches)), " / ".join(map(str, bom.links))
        table.add_row(family, traits.help, routing, str(fabric.max_gpus()), str(gpus), tiers, links)
    console.print(table)
    console.print(
        "parameters (hardware.fabric): family, nic_gbps (knobs), gpus_per_server "
        f"({defaults.gpus_per_server}), nics_per_server ({defaults.nics_per_server}), switch_radix "
        f"({defaults.switch_radix}), oversubscription ({defaults.oversubscription:g}), port_latency_s "
        f"({defaults.port_latency_s:g}), failures (none); draw one with --draw --family F --num-gpus N"
    )
    return 0


def _from_simai(args: argparse.Namespace, console: Console) -> int:
    """A SimAI topology file drawn, and what it is built from counted tier by tier."""
    from dse.cost import bom_ownership, default_price_book
    from dse.spec.inputs import TOPOLOGY_LIMIT, regular_file
    from simulators.hardware import get_gpu
    from simulators.network import draw_fabric, graph_bill_of_materials, graph_of, read_simai_topology

    regular_file(args.from_simai, "--from-simai", TOPOLOGY_LIMIT)
    topology = read_simai_topology(args.from_simai)
    graph = graph_of(topology)
    graph.graph.update(family=f"SimAI topology {short(args.from_simai.name)}", gpu=topology.gpu_type)
    for line in draw_fabric(graph):
        console.print(line, markup=False, highlight=False)
    bom = graph_bill_of_materials(graph)
    console.print(
        f"bill of materials: {bom.servers} servers of {topology.gpus_per_server} GPUs, {bom.nics} NICs; switches per "
        f"tier {' / '.join(map(str, bom.switches))}; links per tier {' / '.join(map(str, bom.links))} at "
        f"{bom.port_gbps:g} Gb/s",
        highlight=False,
    )
    owned = bom_ownership(get_gpu(args.gpu, "--gpu"), topology.num_gpus, bom, bom.port_gbps, default_price_book())
    if owned is None:
        console.print(f"no server price for {args.gpu} in the price book: capex not priced", highlight=False)
    else:
        console.print(
            f"priced as {args.gpu} servers (--gpu) with dse/cost/prices.yaml: capex ${owned.capex_usd:,.0f}, IT power "
            f"{owned.it_power_kw:,.1f} kW",
            highlight=False,
        )
    return 0
