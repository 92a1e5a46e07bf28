"""pareto.png drawn in another process (as `dse search` draws it) is the picture drawn here."""

import numpy as np

from dse.report.png import ParetoPlot, PngProcess, draw_pareto_png

PLOT = ParetoPlot(
    title="study: Pareto front",
    xlabel="time_to_train_days (minimize)",
    ylabel="cost_to_train_usd (minimize)",
    feasible=(np.array([1.0, 2.0, 3.0, 4.0]), np.array([4.0, 2.5, 2.0, 3.0])),
    front=(np.array([1.0, 2.0, 3.0]), np.array([4.0, 2.5, 2.0])),
    joined=True,
)


def drawn_through(process: PngProcess, tmp_path) -> bytes:
    """PLOT sent to `process` and waited for: the PNG's bytes (here.png: drawn in this process)."""
    draw_pareto_png(PLOT, tmp_path / "here.png")
    try:
        process.send(PLOT, tmp_path / "there.png")
        process.wait()
    finally:
        process.close()
    return (tmp_path / "there.png").read_bytes()


def test_the_other_process_draws_the_same_bytes_as_this_one(tmp_path):
    assert drawn_through(PngProcess(), tmp_path) == (tmp_path / "here.png").read_bytes()


def test_a_process_that_died_before_drawing_leaves_the_drawing_to_this_one(tmp_path):
    process = PngProcess()
    process._process.kill()
    process._process.wait()
    assert drawn_through(process, tmp_path) == (tmp_path / "here.png").read_bytes()


def test_a_process_never_sent_a_plot_is_ended_by_close():
    process = PngProcess()
    process.close()
    assert process._process.returncode is not None
