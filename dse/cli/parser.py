"""The `dse` argument parser: its commands, their flags (checked by dse.cli.flags) and handlers."""

from __future__ import annotations

import argparse
from pathlib import Path

from dse.cli import flags, listings
from dse.cli.calibrate import calibrate_nccl_tests_command, calibrate_vidur_command
from dse.cli.collectives import collectives_command
from dse.cli.results import report_command, validate_command
from dse.cli.simulate import simulate_command
from dse.cli.studies import batch_command, search_command
from dse.cli.workload import workload_export_command, workload_import_command, workload_ops_command

FIDELITY_HELP = (
    "climb the fidelity ladder no higher than LEVEL: analytical (the search alone), flow or packet "
    "(default: every level the spec names)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = flags.OneLineParser(prog="dse", description="Design-space exploration for distributed AI systems.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    search = commands.add_parser("search", help="run a study: sweep the space, write the Pareto front")
    search.add_argument("spec", type=Path, help="study spec (YAML), e.g. search_spaces/llama70b.yaml")
    search.add_argument("--trials", type=flags.TRIALS, help="trial budget (total, counting a resumed study's trials)")
    search.add_argument("--timeout", type=flags.TIMEOUT_S, metavar="S", help="stop after S seconds")
    search.add_argument("--seed", type=flags.SEED, help="sampler seed")
    search.add_argument(
        "--sampler",
        metavar="NAME",
        help="the spec's sampler instead (auto, tpe, nsga2, random, refine, grid, or exhaustive: every distinct "
        "plan, only the front and what the ladder promotes stored as trials, every plan in DIR/plans/)",
    )
    search.add_argument("--out", type=Path, metavar="DIR", help="output directory (default reports/<name>)")
    search.add_argument("--storage", metavar="URL", help="Optuna storage URL (default: a journal file in DIR)")
    search.add_argument(
        "--ray-address",
        default="local",
        metavar="ADDR",
        help="'local' (default: evaluate in this process, and start a private Ray, loopback only, once the work "
        "ahead outweighs its start), an address to join a cluster, 'auto' to join the one RAY_ADDRESS names, "
        "'off' to evaluate in this process only",
    )
    search.add_argument("--resume", action="store_true", help="continue the study stored in DIR")
    search.add_argument(
        "--cache", type=Path, metavar="FILE", help="content-addressed outcome cache shared with other runs (JSON lines)"
    )
    search.add_argument("--fidelity", metavar="LEVEL", help=FIDELITY_HELP)
    search.add_argument(
        "--validate",
        type=flags.TOP,
        metavar="N",
        help="at the end, replay the top N candidates' collectives with real traffic (RDMA where present, else TCP)",
    )
    search.set_defaults(handler=search_command)

    batch = commands.add_parser(
        "batch", help="run many studies at once on one Ray cluster, sharing one cache; write a combined report"
    )
    batch.add_argument("specs", type=Path, nargs="+", metavar="SPEC", help="study specs, e.g. search_spaces/*.yaml")
    batch.add_argument("--trials", type=flags.TRIALS, help="trial budget of every study")
    batch.add_argument("--timeout", type=flags.TIMEOUT_S, metavar="S", help="stop every study after S seconds")
    batch.add_argument("--seed", type=flags.SEED, help="sampler seed of every study")
    batch.add_argument(
        "--out", type=Path, metavar="DIR", default=Path("reports/batch"), help="batch directory (default reports/batch)"
    )
    batch.add_argument("--ray-address", default="local", metavar="ADDR", help="as for dse search")
    batch.add_argument("--resume", action="store_true", help="continue every study of the batch in DIR")
    batch.add_argument("--fidelity", metavar="LEVEL", help=FIDELITY_HELP)
    batch.set_defaults(handler=batch_command)

    report = commands.add_parser(
        "report", help="re-render a study's reports (HTML, PNG, summary, tables) from its directory"
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="the study's output directory, e.g. reports/llama70b")
    report.set_defaults(handler=report_command)

    candidate = flags.OneLineParser(add_help=False)  # how simulate and export name one candidate
    candidate.add_argument("spec", type=Path, help="study spec (YAML)")
    candidate.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE", help="choose a knob value")
    candidate.add_argument("--config", metavar="best", help="'best': the first row of the study's pareto.csv")
    candidate.add_argument("--study", type=Path, metavar="DIR", help="the study's output directory (for --config)")

    simulate = commands.add_parser(
        "simulate", parents=[candidate], help="evaluate one candidate and show its full breakdown"
    )
    simulate.add_argument("--json", action="store_true", help="print one JSON object")
    simulate.add_argument(
        "--fail",
        action="append",
        default=[],
        metavar="TIER=COUNT",
        help="also run the candidate with COUNT failed switches of TIER (leaf, spine, aggregation, core) or "
        "failed leaf uplinks (links=COUNT), and show what it costs",
    )
    simulate.add_argument(
        "--ecmp-convergence-s",
        type=flags.ECMP_CONVERGENCE_S,
        metavar="S",
        help="with --fail: seconds until ECMP routes around the failure (default: the spec's "
        "hardware.fabric.failures.ecmp_convergence_s)",
    )
    simulate.set_defaults(handler=simulate_command)

    workload = commands.add_parser("workload", help="SimAI/AICB workload files")
    workload_commands = workload.add_subparsers(dest="workload_command", required=True, metavar="ACTION")
    imported = workload_commands.add_parser("import", help="time a SimAI/AICB workload file with dse's network model")
    imported.add_argument("file", type=Path, help="a SimAI workload text file")
    imported.add_argument("--gpu", required=True, help="GPU type of the cluster (see dse gpus)")
    imported.add_argument(
        "--num-gpus",
        type=flags.NUM_GPUS,
        metavar="N",
        help="GPUs of the job, for older AICB files whose header lacks all_gpus (SimAI's -g)",
    )
    imported.add_argument("--json", action="store_true", help="print one JSON object")
    imported.set_defaults(handler=workload_import_command)

    exported = workload_commands.add_parser(
        "export", parents=[candidate], help="write one candidate as a SimAI/AICB workload or Chakra traces"
    )
    exported.add_argument(
        "--format",
        choices=["simai", "chakra"],
        default="simai",
        help="simai: one rank's SimAI/AICB text file; chakra: one Chakra execution trace per rank for "
        "ASTRA-sim, OUT/dse.<rank>.et",
    )
    exported.add_argument(
        "--out", type=Path, required=True, metavar="OUT", help="the file (simai) or directory (chakra) to write"
    )
    exported.add_argument(
        "--stage",
        type=flags.stage,
        metavar="STAGE",
        help="simai only: pipeline stage whose rank the file shows: busiest (default: the one pacing the "
        "pipeline), a stage number, or all (one file per stage, OUT's name with -stageK)",
    )
    exported.add_argument("--force", action="store_true", help="chakra only: write into an OUT that holds files")
    exported.set_defaults(handler=workload_export_command)

    listed = workload_commands.add_parser(
        "ops", parents=[candidate], help="list one candidate's operations per layer and phase (FLOPs, bytes)"
    )
    listed.add_argument("--csv", type=Path, metavar="FILE", help="write every operation to FILE")
    listed.set_defaults(handler=workload_ops_command)

    models = commands.add_parser("models", help="list the model zoo")
    models.set_defaults(handler=listings.models)
    gpus = commands.add_parser("gpus", help="list the GPU catalogue")
    gpus.set_defaults(handler=listings.gpus)
    validate = commands.add_parser("validate", help="replay the best candidates' collectives on real NICs or TCP")
    validate.add_argument("dir", type=Path, nargs="?", help="a study's output directory (reports/<study>)")
    validate.add_argument("--top", type=flags.TOP, default=3, help="Pareto candidates to replay (default 3)")
    validate.add_argument("--transport", choices=("tcp", "rdma"), default="tcp")
    validate.add_argument("--ray-address", default=None, help="run one rank per node of this Ray cluster")
    validate.add_argument(
        "--max-ranks", type=flags.MAX_RANKS, default=8, help="ranks per replayed collective (default 8)"
    )
    validate.add_argument(
        "--max-mb", type=flags.MAX_MB, default=64, help="bytes per replayed collective, MiB (default 64)"
    )
    validate.add_argument("--calibrate", action="store_true", help="fit the NIC efficiency and write it")
    validate.add_argument("--check", action="store_true", help="report pyverbs and RDMA devices, then exit")
    validate.set_defaults(handler=validate_command)
    calibrate = commands.add_parser("calibrate", help="turn measured profiles into tables a spec names")
    calibrate_commands = calibrate.add_subparsers(dest="calibrate_command", required=True, metavar="SOURCE")
    vidur = calibrate_commands.add_parser(
        "vidur", help="a Vidur mlp.csv profile as a kernel calibration table (hardware.calibration)"
    )
    vidur.add_argument("profile", type=Path, help="Vidur's data/profiling/compute/<gpu>/<model>/mlp.csv")
    vidur.add_argument("--gpu", required=True, help="the GPU it was measured on (see dse gpus)")
    vidur.add_argument("--out", type=Path, required=True, metavar="FILE", help="where to write the table")
    vidur.add_argument("--source", metavar="TEXT", help="who measured it, where, when (each row's source)")
    vidur.add_argument(
        "--powers-of-two", action="store_true", help="keep the token counts that are powers of two (a compact table)"
    )
    vidur.set_defaults(handler=calibrate_vidur_command)
    nccl = calibrate_commands.add_parser(
        "nccl-tests", help="nccl-tests logs as measured collective curves (hardware.network_calibration)"
    )
    nccl.add_argument("logs", type=Path, nargs="+", metavar="LOG", help="all_reduce_perf, all_gather_perf, ... output")
    nccl.add_argument("--gpu", required=True, help="the GPU the logs were measured on (see dse gpus)")
    nccl.add_argument("--out", type=Path, required=True, metavar="FILE", help="the network calibration file to write")
    nccl.set_defaults(handler=calibrate_nccl_tests_command)
    collectives = commands.add_parser(
        "collectives", help="time every collective algorithm per op, size and scale on a fabric; show auto's pick"
    )
    collectives.add_argument("--gpu", default="H100-SXM", help="GPU type (see dse gpus; default H100-SXM)")
    collectives.add_argument(
        "--num-gpus", type=flags.listed(flags.NUM_GPUS), default=[128], metavar="N[,N...]", help="scales (default 128)"
    )
    collectives.add_argument(
        "--op",
        type=flags.listed(str),
        default=["all_reduce"],
        metavar="OP[,OP...]",
        help="all_reduce, reduce_scatter, all_gather, all_to_all, broadcast, send_recv (default all_reduce)",
    )
    collectives.add_argument(
        "--bytes",
        type=flags.listed(flags.byte_size),
        default=[2**30],
        metavar="SIZE[,SIZE...]",
        help="message sizes, nccl-tests convention, with units B, KiB, MiB, GiB (default 1GiB)",
    )
    collectives.add_argument("--fabric", default="rail-optimized", help="fabric family (see dse topologies)")
    collectives.add_argument("--nic-gbps", type=flags.NIC_GBPS, default=400, help="NIC line rate (default 400)")
    collectives.add_argument(
        "--level", default="analytical", help="analytical (default), flow or packet (packet: small scales only)"
    )
    collectives.add_argument("--json", action="store_true", help="print one JSON list of rows")
    collectives.set_defaults(handler=collectives_command)
    topologies = commands.add_parser("topologies", help="list the fabric families and their parameters")
    topologies.add_argument("--simai", type=Path, metavar="FILE", help="write a fabric as a SimAI topology file")
    topologies.add_argument("--force", action="store_true", help="with --simai: overwrite an existing FILE")
    topologies.add_argument(
        "--from-simai",
        type=Path,
        metavar="FILE",
        help="read a SimAI topology file: draw it and list (and, for --gpu, price) what it is built from",
    )
    topologies.add_argument("--draw", action="store_true", help="draw one fabric's tiers and wiring as text")
    topologies.add_argument("--family", default="rail-optimized", help="fabric family (with --draw or --simai)")
    topologies.add_argument("--gpu", default="H100-SXM", help="GPU type (with --draw, --simai or --from-simai)")
    topologies.add_argument("--num-gpus", type=flags.NUM_GPUS, default=64, help="GPUs (with --draw or --simai)")
    topologies.add_argument(
        "--nic-gbps", type=flags.NIC_GBPS, default=400, help="NIC line rate (with --draw or --simai)"
    )
    topologies.set_defaults(handler=listings.topologies)
    return parser
