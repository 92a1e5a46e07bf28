"""One candidate, fully explained: `dse simulate SPEC --set tp=8 ... [--config best] [--json]`."""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from dse.errors import SpecError
from dse.evaluation.evaluate import Evaluator
from dse.evaluation.space import SearchSpace
from dse.spec import parse_study
from dse.spec.training import NUMBER_OR_WORD_KNOBS
from simulators.analytical import plan_collectives, simulate_training
from simulators.network import family_names
from simulators.serving import ROUTERS, SCHEDULERS
from simulators.workload import GIB, OFFLOAD_MODES, PIPELINE_SPLITS, RECOMPUTE_MODES, SCHEDULES, stage_layers


def candidate_params(space: SearchSpace, assignments: Sequence[str], config: str | None) -> dict[str, Any]:
    """The params of one candidate: `--config best` takes the first row of the study's
    pareto.csv, `--set knob=value` sets single knobs, a knob with one value in the spec takes it.
    A knob with several values and no choice is an error, never a silent pick. Every value,
    typed or read from pareto.csv, passes the spec's own checks of that knob (SpecError)."""
    params: dict[str, Any] = {}
    if config is not None:
        params.update(_best_params(space, config))
    knobs = space.knobs
    for assignment in assignments:
        name, sep, text = assignment.partition("=")
        if not sep or name not in knobs:
            hint = _did_you_mean(name, knobs)
            raise SpecError(f"--set: {assignment!r} is not knob=value{hint}; knobs: {', '.join(knobs)}")
        params[name] = _checked(space, name, _parse(name, text, space.values[name]), f"--set {name}={text}")
    chosen = {k: params.get(k, space.values[k][0]) for k in knobs}
    missing = [k for k in knobs if k not in params and _matters(space, chosen, k)]
    if missing:
        choices = "; ".join(f"{k}: {', '.join(map(str, space.values[k]))}" for k in missing)
        raise SpecError(f"--set: the spec gives several values for {', '.join(missing)}; choose with --set ({choices})")
    return chosen


def _matters(space: SearchSpace, params: dict[str, Any], knob: str) -> bool:
    """Whether the knob's value changes the plan the other params describe: the decode pool of
    a deployment that is not disaggregated, say, need not be chosen (a summary's reproduce
    command leaves such knobs out)."""
    return len({space.resolved.kind.params_key({**params, knob: value}) for value in space.values[knob]}) > 1


def simulate_params(space: SearchSpace, params: dict[str, Any]) -> dict[str, Any]:
    """Everything known about one candidate, as plain JSON-ready values."""
    outcome = Evaluator(space).evaluate(params)
    report: dict[str, Any] = {"params": params, "feasible": outcome.feasible, "reason": outcome.reason}
    if outcome.error:
        report["error"] = outcome.error
    if not outcome.metrics:  # the plan cannot run: no numbers to show
        return report
    report["metrics"] = dict(outcome.metrics)
    if not space.resolved.kind.has_step_breakdowns:
        return report
    candidate = space.candidate(params)
    result = simulate_training(candidate)
    memory = result.memory
    report["breakdown_s"] = dict(result.breakdown_s)
    plan = candidate.plan  # how the split, first/last counts or a layout of the spec shared the layers
    report["layers_per_stage"] = [len(stage_layers(candidate.model, plan, s)) for s in range(plan.pp)]
    report["memory_gib"] = {
        "weights": memory.weights_bytes / GIB,
        "gradients": memory.gradients_bytes / GIB,
        "optimizer": memory.optimizer_bytes / GIB,
        "activations": memory.activations_bytes / GIB,
        "reserve": memory.reserve_bytes / GIB,
        "total": memory.total_gib,
    }
    if memory.host_bytes or memory.nvme_bytes:  # what the plan offloads, per tier, and the GPU's share of it
        report["memory_gib"].update(
            {
                "host_optimizer": memory.host_optimizer_bytes / GIB,
                "host_activations": memory.host_activations_bytes / GIB,
                "host_weights": memory.host_weights_bytes / GIB,
                "host_total": memory.host_bytes / GIB,
                "host_capacity": result.host_memory_bytes / GIB,
            }
        )
        if memory.nvme_bytes:
            report["memory_gib"].update(
                {"nvme_optimizer": memory.host_nvme_optimizer_bytes / GIB, "nvme_capacity": result.nvme_bytes / GIB}
            )
    report["collectives"] = [dataclasses.asdict(use) for use in plan_collectives(candidate)]
    return report


def stored_levels(space: SearchSpace, params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """What the fidelity ladder stored for this candidate in the spec's study directory, by
    level above the analytical one (metrics, feasibility, reason, congestion factors): read from
    the study database, never simulated again. Empty when there is no study there or the
    candidate never climbed."""
    from dse.report.files import JOURNAL_FILE, SPEC_FILE, load_study_dir
    from dse.search.level_records import ANALYTICAL, standings

    out_dir = space.resolved.study.output_dir
    if not (out_dir / SPEC_FILE).is_file() or not ((out_dir / JOURNAL_FILE).is_file() or space.resolved.study.storage):
        return {}
    study, resolved = load_study_dir(out_dir)
    kind = resolved.kind
    wanted = kind.params_key(params)
    trials = {t.number: t for t in study.get_trials(deepcopy=False)}
    for number, standing in standings(study, resolved).items():
        if kind.params_key(trials[number].params) == wanted:
            return {
                level: {
                    "metrics": dict(outcome.metrics),
                    "feasible": outcome.feasible,
                    "reason": outcome.reason,
                    "factors": list(outcome.details.get("factors", [])),
                }
                for level, outcome in standing.outcomes.items()
                if level != ANALYTICAL
            }
    return {}


def _best_params(space: SearchSpace, config: str) -> dict[str, Any]:
    """The knobs of the first row of pareto.csv, each checked like a `--set` value: the file may
    be damaged or edited by hand, and a bad cell must not reach the simulator."""
    if config != "best":
        raise SpecError(f"--config: {config!r} is not allowed; allowed: best")
    path = space.resolved.study.output_dir / "pareto.csv"
    if not path.exists():
        raise SpecError(f"--config: {path} does not exist; run `dse search` on this spec first")
    front = _read_front(path)
    if front.empty:
        raise SpecError(f"--config: {path} holds no feasible candidate")
    row = front.iloc[0]
    if not any(k in row.index for k in space.knobs):
        raise SpecError(f"--config: {path} is not a pareto.csv of this study: no column {', '.join(space.knobs)}")
    params = {}
    for name, value in space.params_of_row(row).items():
        if value is None:  # a knob without effect in this plan: the spec's first value stands in
            continue
        text = _cell_text(value)
        params[name] = _checked(space, name, _parse(name, text, space.values[name]), f"--config: {path} {name}={text}")
    return params


def _cell_text(value: Any) -> str:
    """A table cell as `--set` would spell it (a column with empty cells holds integers as floats)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


MAX_FRONT_BYTES = 64 * 2**20  # a front of a million trials is far smaller; more is not a pareto.csv


def _read_front(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise SpecError(f"--config: {path} is not a regular file")
    if path.stat().st_size > MAX_FRONT_BYTES:
        raise SpecError(f"--config: {path} is over {MAX_FRONT_BYTES // 2**20} MiB; not a pareto.csv")
    try:
        return pd.read_csv(path, encoding="utf-8")
    except pd.errors.EmptyDataError:
        raise SpecError(f"--config: {path} is empty; run `dse search` or `dse report` to write it again") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpecError(f"--config: {path} is not a readable CSV ({reason})") from None


_KIND_NAMES = {int: "an integer", bool: "true or false", str: "a name", float: "a number"}


def _parse(name: str, text: str, examples: tuple) -> Any:
    """`text` as a value of the knob's type (that of its values in the spec); a float is finite."""
    if name in NUMBER_OR_WORD_KNOBS:  # a number or one word (`spare_servers: [auto, 4]`)
        word, number, _, _ = NUMBER_OR_WORD_KNOBS[name]
        if text == word:
            return text
        examples = (number(),)
    kind = float if any(isinstance(v, float) for v in examples) else type(examples[0])  # nic_gbps: [400, 800.5]
    try:
        if kind is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        value = kind(text)
        if kind is float and not math.isfinite(value):
            raise ValueError
        return value
    except ValueError:
        expected = _KIND_NAMES.get(kind, kind.__name__)
        example = str(examples[0]).lower() if kind is bool else examples[0]
        raise SpecError(f"--set: {name}={text!r} is not {expected}; e.g. {name}={example}") from None


# Where each knob lives in the spec (the rest are `search.<knob>`).
_SPEC_FIELDS = {
    "gpu": "hardware.gpu",
    "num_gpus": "hardware.num_gpus",
    "fabric": "hardware.fabric.family",
    "nic_gbps": "hardware.fabric.nic_gbps",
}


def _checked(space: SearchSpace, name: str, value: Any, where: str) -> Any:
    """`value` if the spec would accept it as the knob's only value, else SpecError naming `where`
    and what is allowed. GPUs are those the spec names: only they have prices and resolved specs."""
    if name == "gpu":
        if value not in space.values["gpu"]:
            allowed = space.values["gpu"]
            raise SpecError(
                f"{where}: not a GPU of this spec{_did_you_mean(value, allowed)}; allowed: {', '.join(allowed)} "
                "(hardware.gpu)"
            )
        return value
    field = _SPEC_FIELDS.get(name, f"search.{name}")
    raw = space.resolved.study.model_dump(mode="json")
    node = raw
    *parents, leaf = field.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = [value]
    try:
        parse_study(raw)
    except SpecError as exc:
        hint = _did_you_mean(value, _choices()[name]) if name in _choices() and isinstance(value, str) else ""
        raise SpecError(f"{where}: {exc}{hint}") from None
    return value


def _choices() -> dict[str, tuple]:
    """The named choices of the knobs, for a "did you mean" (the spec's checks give the allowed
    list); read when asked, so families registered at run time are among them."""
    return {
        "recompute": RECOMPUTE_MODES,
        "pipeline_split": PIPELINE_SPLITS,
        "schedule": SCHEDULES,
        "offload": OFFLOAD_MODES,
        "fabric": family_names(),
        "scheduler": tuple(SCHEDULERS),
        "router": tuple(ROUTERS),
    }


def _did_you_mean(name: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(str(name), [str(a) for a in allowed], n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
