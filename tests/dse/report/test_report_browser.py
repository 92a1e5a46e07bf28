"""report.html in a real browser: headless Chromium, offline, must draw every plot without a
script error. A screenshot of each page is kept under test-artifacts/ for a human to look at."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import TINY_SPEC

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium; .ci/run installs it)"
)


def _chromium(page: Path, profile: Path, *action: str) -> subprocess.CompletedProcess:
    """Open `page` with no network (every host name fails to resolve) and software WebGL, let
    its scripts run for 10 s of virtual time, then perform `action` (dump the DOM, screenshot)."""
    flags = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--use-angle=swiftshader",
        "--enable-unsafe-swiftshader",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=10000",
    ]
    run = subprocess.run([CHROMIUM, *flags, *action, page.as_uri()], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def _page_errors(stderr: str, page: Path) -> list[str]:
    """Console messages of the page that are errors (console.error text or uncaught exceptions)."""
    lines = [line for line in stderr.splitlines() if "CONSOLE" in line and page.name in line]
    return [line for line in lines if "uncaught" in line.lower() or "error" in line.lower()]


def _plots(dom: str) -> dict[str, str]:
    """Each plot div's id and its markup up to the next plot."""
    parts = re.split(r'(?=<div id="plot-\d+")', dom)
    return {re.match(r'<div id="(plot-\d+)"', p).group(1): p for p in parts if p.startswith('<div id="plot-')}


@pytest.mark.slow
def test_every_plot_renders_offline_without_script_errors(reported_study, tmp_path):
    _every_plot_drawn(reported_study / "report.html", tmp_path, ARTIFACTS / "report.png")


@pytest.mark.slow
def test_the_batch_page_draws_every_front_offline(write_spec, tmp_path):
    from dse.cli.commands import main

    first = write_spec(name="a.yaml")
    second = write_spec(
        TINY_SPEC.replace("name: tiny", "name: tiny-h200").replace("[H100-SXM]", "[H200]"), name="b.yaml"
    )
    out = tmp_path / "batch"
    assert main(["batch", str(first), str(second), "--ray-address", "off", "--out", str(out), "--trials", "16"]) == 0
    _every_plot_drawn(out / "batch.html", tmp_path, ARTIFACTS / "batch.png", min_bytes=20_000)


def _every_plot_drawn(page: Path, tmp_path: Path, shot: Path, min_bytes: int = 50_000) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    shot.unlink(missing_ok=True)
    run = _chromium(page, tmp_path / "profile", "--window-size=1400,5200", f"--screenshot={shot}", "--dump-dom")
    expected = re.findall(r'<div id="(plot-\d+)"', page.read_text())
    plots = _plots(run.stdout)
    assert expected and sorted(plots) == sorted(expected)
    drawn = [name for name, markup in plots.items() if 'class="main-svg"' in markup]
    assert sorted(drawn) == sorted(expected), f"not drawn: {set(expected) - set(drawn)}"
    assert 'class="no-webgl"' not in run.stdout  # plotly's notice in place of a 3-D or parallel-coordinates plot
    assert _page_errors(run.stderr, page) == []
    assert shot.stat().st_size > min_bytes  # a page of plots, not a blank one


@pytest.mark.slow
def test_a_study_with_no_feasible_trial_opens_with_its_messages(infeasible_study, tmp_path):
    page = infeasible_study / "report.html"
    run = _chromium(page, tmp_path / "profile", "--dump-dom")
    assert run.stdout.count("No feasible trial: nothing to plot.") >= 4
    assert _page_errors(run.stderr, page) == []


# Run in a copy of the page once it has drawn: the page's width and height against its last
# section's bottom edge, written into the title for --dump-dom to carry out.
_PROBE = """<script>window.addEventListener("load", () => setTimeout(() => {
  const last = [...document.querySelectorAll("section")].pop().getBoundingClientRect().bottom + window.scrollY;
  document.title = `layout ${document.documentElement.scrollWidth} ${window.innerWidth} `
    + `${document.documentElement.scrollHeight} ${Math.round(last)}`;
}, 1000));</script></body>"""


@pytest.mark.slow
def test_the_report_fits_a_1400_px_window_and_ends_with_its_content(reported_study, tmp_path):
    """Wide tables scroll in their own box, so the page never scrolls sideways; and nothing
    (a hidden plot, a tall margin) leaves blank space below the last section."""
    probe = tmp_path / "probe.html"
    probe.write_text((reported_study / "report.html").read_text().replace("</body>", _PROBE))
    run = _chromium(probe, tmp_path / "profile", "--window-size=1400,900", "--dump-dom")
    scroll_width, window_width, height, last = map(
        int, re.search(r"<title>layout ([\d ]+)</title>", run.stdout)[1].split()
    )
    assert scroll_width <= window_width
    assert height - last < 100
