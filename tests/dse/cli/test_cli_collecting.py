"""The command line collects garbage as an evaluating process does from its start: the commands
it loads (a second of imports) are imported after the thresholds are set."""

import subprocess
import sys
from pathlib import Path

from dse.search.collecting import GC_THRESHOLDS

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = """
import gc, sys
import dse.cli
seen = []

class Watch:  # notes the thresholds in force when the commands are imported
    def find_spec(self, name, path, target=None):
        if name == "dse.cli.commands":
            seen.append(gc.get_threshold())
        return None

sys.meta_path.insert(0, Watch())
try:
    dse.cli.main(["--help"])
except SystemExit:
    pass
print(seen, file=sys.stderr)
"""


def test_the_commands_are_imported_with_the_evaluating_thresholds():
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stderr.strip().splitlines()[-1] == str([GC_THRESHOLDS])
