"""`dse calibrate vidur`: a public or private profile turned into a table a spec names."""

from __future__ import annotations

import argparse

from rich.console import Console

from dse import paths


def calibrate_vidur_command(args: argparse.Namespace, console: Console) -> int:
    import numpy as np

    from dse.calibrate.vidur import gemm_rows, write_table
    from dse.spec.inputs import CALIBRATION_LIMIT, regular_file
    from simulators.hardware import gemm_time_s, get_gpu
    from simulators.serving import load_vidur_profile

    gpu = get_gpu(args.gpu, "--gpu")
    regular_file(args.profile, "profile", CALIBRATION_LIMIT)
    paths.output_file(args.out, "--out")
    profile = load_vidur_profile(mlp_csv=args.profile).mlp
    rows = gemm_rows(profile, gpu.name, args.source or f"Vidur profile {args.profile.name}", args.powers_of_two)
    write_table(rows, args.out)
    shapes = np.array([(r["m"], r["n"], r["k"]) for r in rows], dtype=float)
    measured = np.array([r["time_s"] for r in rows])
    modelled = gemm_time_s(gpu, shapes[:, 0], shapes[:, 1], shapes[:, 2], 1, "fp16")
    error = modelled / measured - 1
    console.print(
        f"wrote {args.out}: {len(rows)} fp16 GEMMs measured on {gpu.name}; the analytical model against them: "
        f"median {np.median(error):+.1%}, mean absolute {np.mean(np.abs(error)):.1%} (with the table named in "
        "hardware.calibration, it returns them exactly)",
        highlight=False,
    )
    return 0


def calibrate_nccl_tests_command(args: argparse.Namespace, console: Console) -> int:
    from dse.calibrate.nccl_tests import fit_curves, read_log
    from dse.spec.inputs import CALIBRATION_LIMIT, read_text
    from dse.spec.network_calibration import write_collective_calibration
    from simulators.hardware import get_gpu

    gpu = get_gpu(args.gpu, "--gpu")
    paths.output_file(args.out, "--out")
    measurements = [m for log in args.logs for m in read_log(log, read_text(log, "log", CALIBRATION_LIMIT))]
    names = ", ".join(log.name for log in args.logs)
    calibration = fit_curves(measurements, gpu, f"{len(measurements)} nccl-tests rows on {gpu.name}: {names}")
    command = "dse calibrate nccl-tests " + " ".join(str(log) for log in args.logs) + f" --gpu {gpu.name}"
    write_collective_calibration(calibration, args.out, command)
    for curve in calibration.curves:
        lowest, highest = curve.sizes_bytes[0], curve.sizes_bytes[-1]
        console.print(
            f"{curve.op} {curve.scale}: {len(curve.factors)} sizes {lowest:.4g}-{highest:.4g} B, measured / modelled "
            f"time {min(curve.factors):.3g}-{max(curve.factors):.3g}",
            highlight=False,
        )
    console.print(f"wrote {args.out}: name it in hardware.network_calibration", highlight=False)
    return 0
