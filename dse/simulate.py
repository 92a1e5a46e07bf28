"""One candidate, fully explained: `dse simulate SPEC --set tp=8 ... [--config best] [--json]`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pandas as pd

from dse.checks import ResolvedStudy
from dse.errors import SpecError
from dse.evaluate import Evaluator
from dse.space import SearchSpace, params_key, params_of_row
from simulators.analytical import plan_collectives, simulate_training
from simulators.workload import GIB


def candidate_params(space: SearchSpace, assignments: Sequence[str], config: str | None) -> dict[str, Any]:
    """The params of one candidate: `--config best` takes the first row of the study's
    pareto.csv, `--set knob=value` sets single knobs, a knob with one value in the spec takes it.
    A knob with several values and no choice is an error, never a silent pick."""
    params: dict[str, Any] = {}
    if config is not None:
        params.update(_best_params(space.resolved, config))
    knobs = space.knobs
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or name not in knobs:
            raise SpecError(f"--set: {assignment!r} is not knob=value; knobs: {', '.join(knobs)}")
        params[name] = _parse(name, text, space.values[name])
    chosen = {k: params.get(k, space.values[k][0]) for k in knobs}
    missing = [k for k in knobs if k not in params and _matters(chosen, k, space.values[k])]
    if missing:
        choices = "; ".join(f"{k}: {', '.join(map(str, space.values[k]))}" for k in missing)
        raise SpecError(f"--set: the spec gives several values for {', '.join(missing)}; choose with --set ({choices})")
    return chosen


def _matters(params: dict[str, Any], knob: str, values: Sequence[Any]) -> bool:
    """Whether the knob's value changes the plan the other params describe: the decode pool of
    a deployment that is not disaggregated, say, need not be chosen (a summary's reproduce
    command leaves such knobs out)."""
    return len({params_key({**params, knob: value}) for value in values}) > 1


def simulate_params(space: SearchSpace, params: dict[str, Any]) -> dict[str, Any]:
    """Everything known about one candidate, as plain JSON-ready values."""
    outcome = Evaluator(space).evaluate(params)
    report: dict[str, Any] = {"params": params, "feasible": outcome.feasible, "reason": outcome.reason}
    if outcome.error:
        report["error"] = outcome.error
    if not outcome.metrics:  # the plan cannot run: no numbers to show
        return report
    report["metrics"] = dict(outcome.metrics)
    if space.resolved.study.mode == "inference":
        return report
    candidate = space.candidate(params)
    result = simulate_training(candidate)
    memory = result.memory
    report["breakdown_s"] = dict(result.breakdown_s)
    report["memory_gib"] = {
        "weights": memory.weights_bytes / GIB,
        "gradients": memory.gradients_bytes / GIB,
        "optimizer": memory.optimizer_bytes / GIB,
        "activations": memory.activations_bytes / GIB,
        "reserve": memory.reserve_bytes / GIB,
        "total": memory.total_gib,
    }
    report["collectives"] = [dataclasses.asdict(use) for use in plan_collectives(candidate)]
    return report


def _best_params(resolved: ResolvedStudy, config: str) -> dict[str, Any]:
    if config != "best":
        raise SpecError(f"--config: {config!r} is not allowed; allowed: best")
    path = resolved.study.output_dir / "pareto.csv"
    if not path.exists():
        raise SpecError(f"--config: {path} does not exist; run `dse search` on this spec first")
    front = pd.read_csv(path)
    if front.empty:
        raise SpecError(f"--config: {path} holds no feasible candidate")
    row = front.iloc[0]
    return params_of_row(row)


_KIND_NAMES = {int: "an integer", bool: "true or false", str: "a name"}


def _parse(name: str, text: str, examples: tuple) -> Any:
    kind = type(examples[0])
    try:
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        return kind(text)
    except ValueError:
        expected = _KIND_NAMES.get(kind, kind.__name__)
        raise SpecError(f"--set: {name}={text!r} is not {expected}; e.g. {name}={examples[0]}") from None
