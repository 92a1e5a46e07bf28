"""Writing the reports loads what it draws with only where it draws: `dse search` draws
pareto.png in another process, so its own process never loads matplotlib, nor the replay
machinery (simulators.rdma) to learn the name of the file `dse validate` writes."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_report_writer_loads_neither_matplotlib_nor_the_replays():
    script = (
        "import sys, dse.report.files, dse.cli.studies;"
        "print(sorted(m for m in ('matplotlib', 'simulators.rdma', 'dse.physical.validate') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
