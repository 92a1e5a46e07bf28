"""Where dse's Ray runs and whom it lets in: a private cluster on loopback with token
authentication, joins only to a cluster the user named, and no Ray left behind by a killed run.

A private cluster (`--ray-address local`) would by default listen on every interface with
authentication off, so any host that reaches the machine could read its key-value store or run
code in it. Here every one of its processes (GCS, raylet, agents, workers, the driver) listens
on 127.0.0.1: Ray takes loopback as the node address where it believes it runs single-machine
(its `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`), and then binds only that; the dashboard is off.
On top, Ray's token authentication (Ray >= 2.52, `RAY_AUTH_MODE=token`) is on with a token made
for this process and handed to the cluster's processes in their environment (`RAY_AUTH_TOKEN`),
so another local user cannot join either, and nothing is written to `~/.ray`.

Each private cluster keeps its files under `<tmp>/dse-ray-<uid>/<driver pid>` (mode 0700, not
Ray's shared `/tmp/ray`), with the driver's start time in `driver`: a driver killed outright
leaves agents that outlive it for minutes, and the next private start reaps them, identified
safely as this user's processes holding files open in a run directory whose driver is gone.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from dse.errors import DseError

LOOPBACK = "127.0.0.1"
_TOKEN = secrets.token_hex(32)  # one per driver process: Ray caches the token it first loads
_SETTINGS = ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN")
_saved: dict[str, str | None] = {}  # their values before start_private, put back by stop_private


def start_private(**init_args) -> Path:
    """Start a private Ray on loopback with token authentication; returns its run directory."""
    reap_dead_runs()
    use_token_auth()
    use_loopback()
    import ray

    run_dir = _new_run_dir()
    ray.init(address="local", _node_ip_address=LOOPBACK, _temp_dir=str(run_dir), include_dashboard=False, **init_args)
    if ray.util.get_node_ip_address() != LOOPBACK:  # never leave a cluster open to the network
        ray.shutdown()
        raise DseError(f"ray: the private cluster did not start on {LOOPBACK}; allowed: --ray-address off")
    return run_dir


def use_token_auth() -> None:
    """Token authentication with this process's token for every cluster it starts from here on
    (their processes read RAY_AUTH_MODE and RAY_AUTH_TOKEN); `stop_private` puts the settings
    back. Ray's config is re-read, since it reads RAY_AUTH_MODE once, at import, and a driver
    keeps the first token it loads: a later cluster of this process must use the same one."""
    _save_settings()
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = _TOKEN
    from ray._raylet import Config

    Config.initialize("")


def use_loopback() -> None:
    """Ray processes started from here on take 127.0.0.1 as their node's address and bind only
    that (a private cluster; a multi-node cluster on this machine, ray.cluster_utils, whose nodes
    a test or benchmark starts with `node_ip_address=LOOPBACK`); `restore_settings` undoes it."""
    _save_settings()
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # read when ray is first imported...
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # ...so also here, in case ray was imported before


def stop_private(run_dir: Path) -> None:
    """Shut the private Ray down, remove its run directory, and put back the settings it changed,
    so that a later join from this process advertises the node's own address again."""
    import ray

    ray.shutdown()
    shutil.rmtree(run_dir, ignore_errors=True)
    restore_settings()


def _save_settings() -> None:
    """Note the settings' values before this process first changes them (`restore_settings`)."""
    for name in _SETTINGS:
        _saved.setdefault(name, os.environ.get(name))


def restore_settings() -> None:
    """Put back the settings `use_token_auth` and `start_private` changed."""
    from ray._private import ray_constants

    for name, value in _saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _saved.clear()
    flag = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")  # as ray_constants reads it at import
    ray_constants.ENABLE_RAY_CLUSTER = flag.lower() in ("true", "1") if flag else not ray_constants.IS_WINDOWS_OR_OSX


def named_address(address: str) -> str:
    """The cluster to join: `auto` is the one RAY_ADDRESS names, never one Ray would find on this
    machine by itself (another user's or another test's); said on stderr so the user sees which."""
    if address != "auto":
        return address
    named = os.environ.get("RAY_ADDRESS", "").strip()
    if not named or named == "auto":
        raise DseError(
            "--ray-address: cannot join 'auto': RAY_ADDRESS does not name a cluster; "
            "allowed: RAY_ADDRESS=host:port with auto, a cluster address, local or off"
        )
    print(f"dse: joining the Ray cluster at {named} (RAY_ADDRESS)", file=sys.stderr)
    return named


def runs_root() -> Path:
    """This user's directory of private clusters (created 0700; refused if someone else owns it)."""
    root = Path(tempfile.gettempdir()) / f"dse-ray-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    info = root.lstat()
    if root.is_symlink() or info.st_uid != os.getuid():
        raise DseError(f"ray: {root} is not this user's own directory; allowed: remove it, or set TMPDIR elsewhere")
    root.chmod(0o700)
    return root


def reap_dead_runs() -> list[int]:
    """Kill what is left of private clusters whose driver died and remove their run directories;
    returns the ids of the processes stopped. Only where /proc exists (Linux); elsewhere nothing."""
    if not Path("/proc/self/fd").is_dir():
        return []
    stopped: list[int] = []
    for run_dir in runs_root().iterdir():
        if not run_dir.name.isdigit() or _driver_alive(run_dir):
            continue
        left = holders(run_dir)
        stopped += left
        for sig in (signal.SIGTERM, signal.SIGKILL):  # Ray's agents may ignore SIGTERM for a while
            for pid in left:
                _signal(pid, sig)
            deadline = time.monotonic() + 3.0
            while left and time.monotonic() < deadline:
                time.sleep(0.1)
                left = [pid for pid in left if _alive(pid)]
        shutil.rmtree(run_dir, ignore_errors=True)
    return stopped


def holders(run_dir: Path) -> list[int]:
    """This user's live processes with a file open under `run_dir`."""
    prefix, mine, found = str(run_dir) + os.sep, os.getuid(), []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if proc.stat().st_uid != mine or not _alive(int(proc.name)):
                continue
            if any(os.readlink(fd).startswith(prefix) for fd in (proc / "fd").iterdir()):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def _new_run_dir() -> Path:
    """This driver's run directory, with its start time in `driver` (a pid alone can be reused)."""
    run_dir = runs_root() / str(os.getpid())
    shutil.rmtree(run_dir, ignore_errors=True)  # a dead driver's that had this pid
    run_dir.mkdir(mode=0o700)
    (run_dir / "driver").write_text(_start_time(os.getpid()) or "")
    return run_dir


def _driver_alive(run_dir: Path) -> bool:
    try:
        recorded = (run_dir / "driver").read_text()
    except OSError:
        return False
    pid = int(run_dir.name)
    return pid == os.getpid() or (_alive(pid) and _start_time(pid) == recorded)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped by its parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass
