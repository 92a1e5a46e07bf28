"""report.html: one self-contained page to explore a study, that opens offline and can be mailed.

plotly.js is embedded once in the page head (no CDN, no MathJax), each figure is a div with a
fixed id so the same study renders to the same file. Every section says so in words when it has
nothing to plot (no feasible trial), rather than failing. Figures are plain dicts in plotly.js's
own schema, written without plotly.py's validation: its figure objects validated and deep-copied
the page template for every figure, most of the page's time.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from functools import cache
from itertools import combinations

import numpy as np
import pandas as pd
import plotly.io
import plotly.offline

from dse.evaluation.space import SearchSpace
from dse.report.summary import hypervolume_text
from dse.search.hypervolume import HypervolumeHistory
from dse.search.level_records import LevelProgress
from dse.spec.metrics import GOODPUT_PARTS
from dse.spec.resolved import ResolvedStudy

# Metrics every front table shows beside the objectives.

GREY = "rgba(150, 150, 150, 0.45)"
GREY_3D = "rgb(120, 120, 120)"
FRONT = "#d62728"
CONFIG = {"displaylogo": False, "responsive": True}
NO_FEASIBLE = "No feasible trial: nothing to plot."
FOUR_DIGITS = "{:.4g}".format  # float_format of the tables


def render_html(
    trials: pd.DataFrame,
    front: pd.DataFrame,
    resolved: ResolvedStudy,
    history: HypervolumeHistory | None,
    spec_text: str,
    fidelity: pd.DataFrame | None = None,
    validation: pd.DataFrame | None = None,
    ladder: Sequence[LevelProgress] = (),
) -> str:
    """The whole page: front scatters, the front as a table, parallel coordinates of every
    feasible trial, time and memory breakdowns of the front, the hypervolume history, the
    goodput of the front under failures (training), the fidelity comparison when the study ran
    one, the spec."""
    feasible = trials[trials["feasible"]]
    space = SearchSpace.from_study(resolved)
    knobs = _varied_knobs(space, feasible)
    figures = Figures()
    sections = [
        ("Pareto front", _front_section(figures, feasible, front, resolved, knobs)),
        ("Pareto candidates", _front_table(front, resolved, knobs)),
        ("All feasible trials", _parallel_section(figures, feasible, resolved, knobs, space.values)),
    ]
    if resolved.kind.has_step_breakdowns:
        sections += [
            ("Time breakdown per step", _bars(figures, front, "breakdown_", "_s", "seconds per step")),
            (
                "Memory per GPU",
                _bars(figures, front, "memory_", "_gib", "GiB per GPU", _capacity_gib(front, resolved), "memory_host_"),
            ),
            *_host_memory_section(figures, front),
        ]
        if "goodput_fraction" in front.columns:
            sections.append(("Goodput under failures", _goodput_bars(figures, front)))
    if ladder:
        sections.append(("Fidelity ladder", _fidelity_section(fidelity, resolved, ladder)))
    if validation is not None and not validation.empty:
        sections.append(("Physical validation", _validation_section(validation)))
    sections += [
        ("Hypervolume", _hypervolume_section(figures, history, resolved)),
        ("Spec", _spec_section(spec_text, resolved)),
    ]
    study = resolved.study
    title = f"{study.name}: {study.mode} of {resolved.model.name}"
    counts = f"{len(trials)} finished trials, {len(feasible)} feasible, {len(front)} on the Pareto front"
    return page(title, counts, sections)


def page(title: str, counts: str, sections: list[tuple[str, str]]) -> str:
    """A whole self-contained page (plotly.js inline): the title, a line of counts, then each
    (heading, HTML content) section. The title, counts and headings are text (escaped here);
    each section's content is HTML, built with its own text escaped."""
    body = "\n".join(f"<section><h2>{html.escape(name)}</h2>\n{content}\n</section>" for name, content in sections)
    return PAGE.format(
        title=html.escape(title), counts=html.escape(counts), plotly_js=plotly.offline.get_plotlyjs(), body=body
    )


def table_html(frame: pd.DataFrame, **options) -> str:
    """A table in the pages' style (class `front`, border 0, no index) in a box that scrolls
    sideways when the table is wider than the page, so the page itself never does; `options`
    go to `DataFrame.to_html` (`float_format=FOUR_DIGITS`, `na_rep`, `escape`)."""
    # Headers may break after an underscore (a zero-width space there), not inside a word.
    frame = frame.rename(columns=lambda name: str(name).replace("_", "_\u200b"))
    return f'<div class="wide">{frame.to_html(index=False, border=0, classes="front", **options)}</div>'


class Figures:
    """Turns figures (traces and a layout, as plotly.js reads them) into divs with ids in order
    of appearance (plot-1, plot-2, ...)."""

    def __init__(self) -> None:
        self.count = 0

    def div(self, traces: list[dict], layout: dict, height_px: int = 520, right_px: int = 30, top_px: int = 60) -> str:
        self.count += 1
        layout = layout | dict(template=_white(), height=height_px, margin=dict(l=70, r=right_px, t=top_px, b=60))
        return plotly.io.to_html(
            dict(data=traces, layout=layout),
            validate=False,
            full_html=False,
            include_plotlyjs=False,
            div_id=f"plot-{self.count}",
            config=CONFIG,
        )


@cache
def _white() -> dict:
    """plotly's "plotly_white" template, as the dict a figure's layout holds."""
    return plotly.io.templates["plotly_white"].to_plotly_json()


def titled(text: str) -> dict:
    return dict(title=dict(text=text))


def _varied_knobs(space: SearchSpace, feasible: pd.DataFrame) -> list[str]:
    """The knobs the spec searches over, with the data-parallel degree they imply."""
    knobs = [k for k in space.knobs if len(space.values[k]) > 1]
    return [*knobs, "dp"] if "dp" in feasible and feasible["dp"].nunique() > 1 else knobs


def _fidelity_section(fidelity: pd.DataFrame | None, resolved: ResolvedStudy, ladder: Sequence[LevelProgress]) -> str:
    """What each level saw and spent, then each promoted candidate at every level it reached:
    its objectives, its rank there and the largest congestion factor found."""
    steps = "".join(f"<li>{html.escape(p.describe())}</li>" for p in ladder)
    note = f"<p>Candidates promoted level by level (best first, each level within its time budget):</p><ul>{steps}</ul>"
    if fidelity is None or fidelity.empty:
        return note
    levels = ["analytical", *(p.level for p in ladder)]
    columns = ["trial", "fidelity"]
    for level in levels:
        metrics = dict.fromkeys(("iteration_time_s", *resolved.objectives))
        columns += [f"{m}_{level}" for m in metrics] + [f"rank_{level}"]
        columns += [f"largest_factor_{level}"] if level != "analytical" else []
    first = resolved.objectives[0]
    best = {
        level: fidelity.loc[fidelity[f"rank_{level}"] == fidelity[f"rank_{level}"].min(), "trial"] for level in levels
    }
    changed = [lv for lv in levels[1:] if not best[lv].empty and set(best[lv]) != set(best["analytical"])]
    verdict = (
        f"<p>The best promoted plan by {html.escape(first)} changed at the {', '.join(changed)} level.</p>"
        if changed
        else f"<p>The best promoted plan by {html.escape(first)} is the same at every level.</p>"
    )
    table = fidelity[[c for c in columns if c in fidelity.columns]]
    return note + verdict + table_html(table, float_format=FOUR_DIGITS, na_rep="–")


def _validation_section(validation: pd.DataFrame) -> str:
    """dse validate's replays: predicted against measured time and bus bandwidth per collective."""
    from dse.physical.validate import replay_scope

    columns = ["trial", "collective", "ranks", "nbytes", "predicted_s", "measured_s", "error_pct"]
    columns += ["predicted_busbw_gbytes_per_s", "measured_busbw_gbytes_per_s", "verified", "transport", "placement"]
    columns += ["scale", "stands_for_fabric"]
    note = (
        f"<p>{len(validation)} collectives of the best candidates replayed with real bytes "
        f"({int(validation['verified'].sum())} verified byte for byte); predictions are the model's "
        "for the same size and rank count on the candidate's network.</p>"
    )
    if "stands_for_fabric" in validation.columns:  # validation.csv of a dse older than the column has none
        note += f"<p>{html.escape(replay_scope(validation))}.</p>"
    table = validation[[c for c in columns if c in validation.columns]]
    return note + table_html(table, float_format=FOUR_DIGITS)


def _hover(frame: pd.DataFrame, columns: list[str]) -> list[str]:
    return [
        "<br>".join([f"trial {row['trial']}", *(f"{c}={row[c]}" for c in columns)]) for row in frame.to_dict("records")
    ]


def _front_section(figures, feasible, front, resolved, knobs) -> str:
    """A scatter for each pair of objectives (a 3-D one too when there are three)."""
    if feasible.empty:
        return f"<p>{NO_FEASIBLE}</p>"
    objectives, directions = resolved.objectives, resolved.directions
    label = {m: f"{m} ({d})" for m, d in zip(objectives, directions)} | {"trial": "trial"}
    pairs = list(combinations(objectives, 2)) or [("trial", objectives[0])]
    layers = _layers(feasible, front, [*objectives, *knobs])
    divs = []
    for x, y in pairs:
        traces = [dict(type="scatter", x=frame[x], y=frame[y], **style) for frame, style in layers]
        layout = titled(f"{y} against {x}") | dict(xaxis=titled(label[x]), yaxis=titled(label[y]))
        divs.append(figures.div(traces, layout))
    if len(objectives) == 3:
        x, y, z = objectives
        traces = []
        for frame, style in layers:
            # 3-D markers look larger, and WebGL draws a translucent grey as nearly white: the
            # feasible trials are opaque there, a darker grey.
            marker = style["marker"] | {"size": style["marker"]["size"] - 3}
            if marker["color"] == GREY:
                marker["color"] = GREY_3D
            traces.append(dict(type="scatter3d", x=frame[x], y=frame[y], z=frame[z], **(style | {"marker": marker})))
        scene = dict(xaxis=titled(x), yaxis=titled(y), zaxis=titled(z))
        divs.append(figures.div(traces, titled("All three objectives") | dict(scene=scene), height_px=700))
    note = (
        "<p>The front is over all objectives, so in a 2-D view some of its points look beaten.</p>"
        if len(objectives) > 2
        else ""
    )
    return note + "\n".join(divs)


def _layers(feasible: pd.DataFrame, front: pd.DataFrame, columns: list[str]) -> list[tuple[pd.DataFrame, dict]]:
    """The feasible trials in grey and the front on top, each with its marker style and hover text."""
    return [
        (
            frame,
            dict(
                mode="markers",
                name=f"{name} ({len(frame)})",
                marker=dict(color=color, size=size),
                hovertext=_hover(frame, columns),
                hoverinfo="text",
            ),
        )
        for frame, name, color, size in ((feasible, "feasible trials", GREY, 7), (front, "Pareto front", FRONT, 10))
    ]


def _front_table(front: pd.DataFrame, resolved: ResolvedStudy, knobs: list[str]) -> str:
    if front.empty:
        return "<p>No feasible trial, so no Pareto candidate.</p>"
    columns = ["trial", *knobs, *resolved.objectives, *resolved.kind.shown_metrics]
    shown = front[list(dict.fromkeys(c for c in columns if c in front.columns))]
    return table_html(shown, float_format=FOUR_DIGITS)


def _parallel_section(figures, feasible, resolved, knobs, values) -> str:
    """Every feasible trial as a line through its knobs and objectives, coloured by the first
    objective; text knobs become integer axes labelled with their values (in the spec's order,
    `values` being the search space's)."""
    if feasible.empty:
        return f"<p>{NO_FEASIBLE}</p>"
    dimensions = []
    for column in knobs:
        data = feasible[column]
        if data.dtype.kind in "iuf" and not data.isna().any():  # numeric knobs: ticks at the values taken
            dimensions.append(_numeric_axis(column, data))
            continue
        text = data.map(lambda v: "-" if pd.isna(v) else str(v))  # "-": a knob without effect here
        spec_order = [str(v) for v in values.get(column, ())]
        categories = list(dict.fromkeys([*spec_order, *sorted(text.unique())]))
        codes = pd.Categorical(text, categories=categories).codes
        dimensions.append(dict(label=column, values=codes, tickvals=list(range(len(categories))), ticktext=categories))
    dimensions += [dict(label=m, values=feasible[m]) for m in resolved.objectives]
    first = resolved.objectives[0]
    line = dict(color=feasible[first], colorscale="Viridis", showscale=True, colorbar=titled(first))
    # Angled labels: the objectives' long names sit side by side at the right and overlapped.
    trace = dict(type="parcoords", dimensions=dimensions, line=line, labelangle=-20, labelside="top")
    div = figures.div([trace], {}, height_px=580, right_px=180, top_px=110)
    note = (
        f"{len(feasible)} feasible trials, coloured by {first}; drag along an axis to filter. Parallel degrees "
        "and other counts spanning a factor of 4 or more are on log axes."
    )
    return f"<p>{html.escape(note)}</p>{div}"


def _numeric_axis(column: str, data: pd.Series) -> dict:
    """A numeric knob's axis, ticked at the values taken. Degrees and counts (tp 1-8, dp
    1-1024, GPUs 64-2048) double from value to value, so where they span a factor of 4 or more
    the axis is log2 (plotly's parallel coordinates have no log axis: the values are plotted as
    their log2, the ticks labelled with the values), else 1-16 would squash together."""
    taken = sorted(data.unique())
    if taken[0] > 0 and taken[-1] >= 4 * taken[0]:
        ticks = np.log2(taken).tolist()
        return dict(label=column, values=np.log2(data), tickvals=ticks, ticktext=[f"{v:g}" for v in taken])
    return dict(label=column, values=data, tickvals=taken)


def _bars(figures, front: pd.DataFrame, prefix: str, suffix: str, unit: str, capacity=None, exclude=None) -> str:
    """One stacked bar per Pareto candidate, a segment per part (parts zero for all, and columns
    starting with `exclude`, left out)."""
    if front.empty:
        return f"<p>{NO_FEASIBLE}</p>"
    parts = [
        c
        for c in front.columns
        if c.startswith(prefix)
        and c.endswith(suffix)
        and (front[c] != 0).any()
        and not (exclude and c.startswith(exclude))
    ]
    labels = [
        f"#{r['trial']} {r['gpu']}x{r['num_gpus']} tp{r['tp']} pp{r['pp']} dp{r['dp']}"
        for r in front.to_dict("records")
    ]
    traces = [
        dict(type="bar", x=labels, y=front[column], name=column.removeprefix(prefix).removesuffix(suffix))
        for column in parts
    ]
    if capacity is not None:
        marker = dict(symbol="line-ew-open", size=30, color="black")
        traces.append(dict(type="scatter", x=labels, y=capacity, mode="markers", name="HBM capacity", marker=marker))
    layout = dict(barmode="stack", yaxis=titled(unit), xaxis=titled("Pareto candidate") | dict(tickangle=-30))
    return figures.div(traces, layout)


def _goodput_bars(figures, front: pd.DataFrame) -> str:
    """Where each Pareto candidate's run goes under failures: days of the run where the study has
    a token budget, else shares of the wall time (simulators/reliability)."""
    days = front["time_to_train_days_with_failures"] if "time_to_train_days_with_failures" in front else None
    parts = front.copy()
    for label, column in GOODPUT_PARTS:
        parts[f"goodput_part_{label}"] = front[column] * (1.0 if days is None else days)
    return _bars(figures, parts, "goodput_part_", "", "share of wall time" if days is None else "days of the run")


def _host_memory_section(figures, front: pd.DataFrame) -> list[tuple[str, str]]:
    """The offloaded bytes per GPU in host memory by part (memory_host_*_gib), where any Pareto
    candidate offloads; none otherwise. Bars of their own: host bytes do not count against HBM."""
    columns = [c for c in front.columns if c.startswith("memory_host_") and (front[c].fillna(0) != 0).any()]
    if not columns:
        return []
    shown = front[["trial", "gpu", "num_gpus", "tp", "pp", "dp", *columns]]
    return [("Host memory and NVMe per GPU (offload)", _bars(figures, shown, "memory_host_", "_gib", "GiB per GPU"))]


def _capacity_gib(front: pd.DataFrame, resolved: ResolvedStudy) -> list[float]:
    """HBM per GPU of each candidate's GPU type, in GiB, like the memory columns."""
    hbm = {gpu.name: gpu.hbm_gib for gpu in resolved.gpus}
    return [hbm[name] for name in front["gpu"]]


def _spec_section(spec_text: str, resolved: ResolvedStudy) -> str:
    """The spec as run, less the settings sections of other study kinds (a training study's
    spec.yaml holds the serving defaults too, every field being explicit there)."""
    from dse.spec.kind import STUDY_KINDS

    unused = {kind.settings_section for kind in STUDY_KINDS.values()} - {resolved.kind.settings_section}
    kept, skipping = [], False
    for line in spec_text.splitlines():
        if line and not line[0].isspace():  # a top-level key (or comment) starts or ends a section
            skipping = line.split(":", 1)[0] in unused
        if not skipping:
            kept.append(line)
    left_out = html.escape(", ".join(sorted(unused)))
    note = f"<p>As run ({left_out}: unused by a {html.escape(resolved.kind.name)} study, left out here; "
    note += "spec.yaml holds every field).</p>"
    return note + f"<pre>{html.escape(chr(10).join(kept))}</pre>"


def _hypervolume_section(figures, history: HypervolumeHistory | None, resolved: ResolvedStudy) -> str:
    text = f"<p>{html.escape(hypervolume_text(history, resolved))}</p>"
    if history is None:
        return text
    trace = dict(type="scatter", x=history.trials, y=history.values, mode="lines", line=dict(shape="hv"))
    reference = ", ".join(f"{m} = {r:.4g}" for m, r in zip(resolved.objectives, history.reference))
    layout = titled(f"Hypervolume of the feasible front after each trial<br><sup>reference point: {reference}</sup>")
    layout |= dict(xaxis=titled("trial"), yaxis=titled("hypervolume (share of the box)") | dict(range=[0, 1.02]))
    return text + figures.div([trace | dict(name="hypervolume")], layout, height_px=420)


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<script type="text/javascript">{plotly_js}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1300px; padding: 0 1em; color: #222; }}
section {{ margin-bottom: 2.5em; }}
div.wide {{ overflow-x: auto; max-width: 100%; }}
table.front {{ border-collapse: collapse; font-size: 0.8em; }}
table.front td {{ padding: 0.2em 0.5em; border-bottom: 1px solid #ddd; text-align: right; white-space: nowrap; }}
table.front th {{ padding: 0.2em 0.5em; border-bottom: 1px solid #ddd; text-align: right; vertical-align: bottom;
  max-width: 9em; }}
pre {{ background: #f6f6f6; padding: 1em; overflow-x: auto; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>{counts}</p>
{body}
</body>
</html>
"""
