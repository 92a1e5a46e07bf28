"""report.html's host memory bars: present where a Pareto candidate offloads, apart from HBM."""

import pandas as pd

from dse.report.html_page import Figures, _bars, _host_memory_section

FRONT = {"trial": [3, 7], "gpu": ["H100-SXM"] * 2, "num_gpus": [8, 8], "tp": [8, 4], "pp": [1, 2], "dp": [1, 1]}


def test_a_front_without_offload_has_no_host_section():
    front = pd.DataFrame({**FRONT, "memory_weights_gib": [16.0, 8.0], "memory_host_optimizer_gib": [0.0, 0.0]})
    assert _host_memory_section(Figures(), front) == []


def test_offloaded_bytes_get_their_own_bars_and_stay_out_of_the_hbm_bars():
    front = pd.DataFrame(
        {
            **FRONT,
            "memory_weights_gib": [16.0, 8.0],
            "memory_host_optimizer_gib": [98.6, 0.0],
            "memory_host_activations_gib": [0.0, 0.0],
        }
    )
    [(title, html)] = _host_memory_section(Figures(), front)
    assert title == "Host memory and NVMe per GPU (offload)"
    assert '"name":"optimizer"' in html.replace(" ", "") and "activations" not in html
    hbm = _bars(Figures(), front, "memory_", "_gib", "GiB per GPU", exclude="memory_host_")
    assert '"name":"weights"' in hbm.replace(" ", "") and "host_optimizer" not in hbm
