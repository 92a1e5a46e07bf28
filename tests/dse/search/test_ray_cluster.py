"""The private Ray that `dse search` starts: every listening socket of its processes on loopback,
unauthenticated clients refused, and what a killed driver leaves behind reaped on the next start;
`--ray-address auto` joins only the cluster RAY_ADDRESS names.

Drivers run as subprocesses, so these tests hold whatever else this test process has connected
to, and what else runs on the machine does not matter to them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dse.errors import DseError
from dse.search.ray_cluster import holders, named_address, reap_dead_runs

ROOT = Path(__file__).resolve().parents[3]
DRIVER = """
import json, os, sys, ray
from dse.search.executor import connect_ray
from dse.search.ray_cluster import stop_private
run_dir = connect_ray("local")
ray.get([ray.remote(lambda: 1).remote() for _ in range(2)])  # workers started, and listening
print(json.dumps({"run_dir": str(run_dir), "gcs": ray.get_runtime_context().gcs_address}), flush=True)
sys.stdin.read()  # until the test closes stdin (or kills this driver)
stop_private(run_dir)
from ray._private import ray_constants
names = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")
print(json.dumps({"env": {n: os.environ.get(n) for n in names}, "cluster": ray_constants.ENABLE_RAY_CLUSTER}))
"""


def _start_driver(env: dict[str, str] | None = None) -> tuple[subprocess.Popen, dict]:
    """A driver that starts dse's private Ray; `env` is added to a copy of this process's
    environment without Ray's own settings (what the driver sets for itself is under test)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_AUTH", "RAY_ENABLE_WINDOWS"))} | {
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER], cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    line = driver.stdout.readline()
    assert line, f"the driver exited with {driver.wait()}"
    return driver, json.loads(line)


@pytest.fixture(scope="module")
def private_ray():
    if not Path("/proc/net/tcp").is_file():
        pytest.skip("no /proc/net/tcp here to read listening sockets from")
    pytest.importorskip("ray")
    driver, info = _start_driver()
    yield driver, info
    driver.stdin.close()
    driver.wait(timeout=60)


@pytest.mark.slow
def test_every_socket_the_private_cluster_listens_on_is_loopback(private_ray):
    driver, info = private_ray
    pids = set(holders(Path(info["run_dir"]))) | _descendants(driver.pid) | {driver.pid}
    listening = _listening(pids)
    assert info["gcs"].startswith("127.0.0.1:")
    assert len(listening) >= 3  # the GCS, the raylet and workers at least: the check sees them
    loopback = {ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")}
    exposed = [(pid, str(ip), port) for pid, ip, port in listening if _unmapped(ip) not in loopback]
    assert not exposed, f"listening beyond loopback: {exposed}"


@pytest.mark.slow
def test_a_client_without_the_token_cannot_join(private_ray, tmp_path):
    _, info = private_ray
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")} | {"HOME": str(tmp_path)}
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # so that this client, too, dials 127.0.0.1 as given
    join = f"import ray; ray.init(address={info['gcs']!r}); print('joined')"
    run = subprocess.run([sys.executable, "-c", join], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "joined" not in run.stdout
    assert "auth" in run.stderr.lower()


@pytest.mark.slow
def test_what_a_killed_driver_leaves_is_reaped_on_the_next_start():
    pytest.importorskip("ray")
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("reaping reads /proc")
    driver, info = _start_driver()
    run_dir = Path(info["run_dir"])
    driver.send_signal(signal.SIGKILL)
    driver.wait()
    time.sleep(1.0)  # the GCS and raylet follow their driver; agents stay behind
    reap_dead_runs()
    assert not holders(run_dir) and not run_dir.exists()


@pytest.mark.slow
def test_stopping_removes_the_run_directory_and_puts_back_the_settings_it_changed():
    pytest.importorskip("ray")
    driver, info = _start_driver(env={"RAY_AUTH_MODE": "disabled"})
    out, _ = driver.communicate("", timeout=60)
    after = json.loads(out)
    assert after["env"]["RAY_AUTH_MODE"] == "disabled"  # as it was before the start
    assert after["env"]["RAY_AUTH_TOKEN"] is None and after["env"]["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] is None
    assert after["cluster"] is True and not Path(info["run_dir"]).exists()


def test_auto_joins_only_the_cluster_ray_address_names(monkeypatch, capsys):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(DseError, match=r"^--ray-address: cannot join 'auto': RAY_ADDRESS does not name a cluster"):
        named_address("auto")
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert named_address("auto") == "10.1.2.3:6379"
    assert "joining the Ray cluster at 10.1.2.3:6379 (RAY_ADDRESS)" in capsys.readouterr().err
    assert named_address("10.9.9.9:6379") == "10.9.9.9:6379"  # an address given is taken as it is


def _descendants(root: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _listening(pids: set[int]) -> list[tuple[int, ipaddress._BaseAddress, int]]:
    """(pid, address, port) of every TCP socket in LISTEN state that one of `pids` holds."""
    by_inode = {}
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    by_inode[link[8:-1]] = pid
        except OSError:
            continue
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not Path(table).is_file():
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in by_inode:  # 0A: TCP_LISTEN
                hex_ip, hex_port = local.split(":")
                words = [bytes.fromhex(hex_ip[i : i + 8])[::-1] for i in range(0, len(hex_ip), 8)]
                found.append((by_inode[inode], ipaddress.ip_address(b"".join(words)), int(hex_port, 16)))
    return found


def _unmapped(ip):
    """::ffff:127.0.0.1 (an IPv6 socket bound to IPv4 loopback) as 127.0.0.1."""
    return ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip
