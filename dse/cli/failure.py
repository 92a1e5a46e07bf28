"""`dse simulate SPEC ... --fail spine=1`: what a failed switch or link costs one candidate.

Why: a cluster loses a spine now and then; the question is whether this plan shrugs it off (a
tier with slack, traffic that stays inside a leaf) or slows down by the share it lost. The
candidate runs twice, on the spec's fabric without failures and with the ones named, and the
table shows every metric of both with the change; the first step after the failure also waits
the ECMP convergence time (the spec's, or --ecmp-convergence-s).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from rich.console import Console

from dse._text import short
from dse.errors import SpecError
from dse.spec.hardware import MAX_FAILED_LINKS, MAX_FAILED_SWITCHES, FailureSettings
from dse.spec.study import Study

TIERS = ("leaf", "spine", "aggregation", "core")


def failure_settings(assignments: Sequence[str], convergence_s: float | None, study: Study) -> FailureSettings:
    """The failures `--fail TIER=COUNT` (or links=COUNT) names, with the convergence time of
    --ecmp-convergence-s or else the spec's; a one-line SpecError for anything else."""
    counts: dict[str, int] = {}
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        limit = MAX_FAILED_LINKS if name == "links" else MAX_FAILED_SWITCHES
        ok = sep and name in (*TIERS, "links") and text.isascii() and text.isdigit() and len(text) < 9
        if not ok or not 1 <= counts.get(name, 0) + int(text) <= limit:
            raise SpecError(
                f"--fail: {assignment!r} is not allowed; allowed: TIER=COUNT with TIER one of "
                f"{', '.join(TIERS)} or links, COUNT an integer from 1 to {limit:,} (summed over repeats)"
            )
        counts[name] = counts.get(name, 0) + int(text)
    links = counts.pop("links", 0)
    switches = counts
    if convergence_s is None:
        convergence_s = study.hardware.fabric.failures.ecmp_convergence_s
    if convergence_s is None:
        raise SpecError(
            "--ecmp-convergence-s: needed with --fail (seconds until ECMP routes around the failure), as the "
            "spec sets no hardware.fabric.failures.ecmp_convergence_s; allowed: 0 to 3600"
        )
    return FailureSettings(switches=switches, links=links, ecmp_convergence_s=convergence_s)


def with_failures(study: Study, failures: FailureSettings) -> Study:
    """`study` whose fabric has these failures (and no others)."""
    fabric = study.hardware.fabric.model_copy(update={"failures": failures})
    return study.model_copy(update={"hardware": study.hardware.model_copy(update={"fabric": fabric})})


def failure_command(args: argparse.Namespace, console: Console) -> int:
    import json

    from dse.cli.candidate import candidate_params, simulate_params
    from dse.cli.listings import new_table
    from dse.evaluation.space import SearchSpace
    from dse.spec import load_study
    from dse.study import resolve_study

    study = load_study(args.spec, output=str(args.study) if args.study else None)
    failures = failure_settings(args.fail, args.ecmp_convergence_s, study)
    spaces = [SearchSpace.from_study(resolve_study(with_failures(study, f))) for f in (FailureSettings(), failures)]
    params = candidate_params(spaces[0], args.set, args.config)
    healthy, failed = (simulate_params(space, params) for space in spaces)
    named = str(failures.value())
    report: dict[str, Any] = {"params": params, "failures": named, "healthy": healthy, "failed": failed}
    report["delta"] = {
        k: failed["metrics"][k] - v for k, v in healthy.get("metrics", {}).items() if k in failed.get("metrics", {})
    }
    step = failed.get("metrics", {}).get("iteration_time_s")
    if step is not None:
        report["first_step_after_failure_s"] = step + failures.ecmp_convergence_s
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    table = new_table(
        f"{short(study.name)}: one candidate, healthy and with {named} failed",
        ["quantity", "healthy", "failed", "change"],
    )
    for key, value in params.items():
        table.add_row(key, str(value), "", "")
    for name, report_of in (("feasible", lambda r: str(r["feasible"])), ("reason", lambda r: r["reason"] or "")):
        table.add_row(name, report_of(healthy), report_of(failed), "")
    for key, change in report["delta"].items():
        before = healthy["metrics"][key]
        share = f" ({100 * change / before:+.3g} %)" if before else ""
        table.add_row(key, f"{before:.5g}", f"{failed['metrics'][key]:.5g}", f"{change:+.4g}{share}")
    if step is not None:
        table.add_row(
            "first step after the failure (s)", "", f"{report['first_step_after_failure_s']:.5g}", "+ ECMP convergence"
        )
    console.print(table)
    return 0
