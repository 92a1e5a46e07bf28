"""What this machine offers for RDMA: pyverbs importable or not, devices, ports, link state.

`devices()` never raises: with no RDMA support `pyverbs.device.get_device_list()` raises rather
than returning an empty list (../shared/TOOLCHAIN.md), and a broken pyverbs build can fail with
OSError at import. Devices come from pyverbs when it imports, else from /sys/class/infiniband.
pyverbs is imported only inside these functions (STYLE 10).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from simulators._errors import SpecError

SYSFS = Path("/sys/class/infiniband")
INSTALL_HINT = (
    "apt-get install python3-pyverbs rdma-core ibverbs-providers, with a venv made --system-site-packages "
    "(PyPI's pyverbs does not build against Debian 12's rdma-core)"
)
_PORT_STATES = {0: "NOP", 1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
_LINK_LAYERS = {0: "Unspecified", 1: "InfiniBand", 2: "Ethernet"}
_MTU_BYTES = {1: 256, 2: 512, 3: 1024, 4: 2048, 5: 4096}


@dataclass(frozen=True)
class Port:
    number: int
    state: str  # ACTIVE, DOWN, INIT, ARMED...
    link_layer: str  # InfiniBand, Ethernet
    detail: str = ""  # rate (sysfs) or active MTU (pyverbs)


@dataclass(frozen=True)
class Device:
    name: str
    ports: tuple[Port, ...]


@dataclass(frozen=True)
class DeviceReport:
    """What this machine offers for RDMA: pyverbs, and devices with their ports.

    Devices come from pyverbs when it imports, else from /sys/class/infiniband; `sysfs` says what
    that directory holds either way.
    """

    pyverbs: bool
    pyverbs_error: str | None
    sysfs: str
    devices: tuple[Device, ...]

    @property
    def active_ports(self) -> list[tuple[str, int]]:
        return [(d.name, p.number) for d in self.devices for p in d.ports if p.state == "ACTIVE"]

    @property
    def usable(self) -> bool:
        return self.pyverbs and bool(self.active_ports)

    def describe(self) -> str:
        """One line: pyverbs status, then devices and port states."""
        verbs = "importable" if self.pyverbs else f"not importable: {self.pyverbs_error}"
        ports = "; ".join(
            f"{d.name} port {p.number} {p.state} ({p.link_layer}{', ' + p.detail if p.detail else ''})"
            for d in self.devices
            for p in d.ports
        )
        devs = ports or ", ".join(d.name for d in self.devices) or "none"
        return f"pyverbs: {verbs}; devices: {devs}; {SYSFS}: {self.sysfs}"


def devices(sysfs_root: Path = SYSFS) -> DeviceReport:
    """Report pyverbs, RDMA devices, ports and link state. Never raises."""
    try:
        importlib.import_module("pyverbs.device")
        ok, error = True, None
    except Exception as exc:  # ImportError, or a broken build's OSError / AttributeError
        ok, error = False, str(exc) or type(exc).__name__
    sysfs_devs = _sysfs_devices(sysfs_root)
    if sysfs_devs is None:
        sysfs = "absent"
    else:
        sysfs = ", ".join(d.name for d in sysfs_devs) or "empty"
    found = _pyverbs_devices() if ok else (sysfs_devs or [])
    return DeviceReport(ok, error, sysfs, tuple(found))


def require_rdma() -> DeviceReport:
    """The device report, or a one-line SpecError saying what is missing and what was found."""
    report = devices()
    if report.usable:
        return report
    if not report.devices:
        what = "no RDMA device found"
    elif not report.pyverbs:
        what = f"pyverbs is not importable ({INSTALL_HINT})"
    else:
        what = "no RDMA port is ACTIVE"
    raise SpecError(f"rdma: {what} ({report.describe()}); allowed here: tcp")


def _sysfs_devices(root: Path) -> list[Device] | None:
    try:
        if not root.is_dir():
            return None
        out = []
        for dev in sorted(root.iterdir()):
            ports = []
            for port in (dev / "ports").glob("*"):
                state = _read(port / "state")  # "4: ACTIVE"
                ports.append(
                    Port(
                        int(port.name) if port.name.isdigit() else 0,
                        state.split(":", 1)[-1].strip() or "unknown",
                        _read(port / "link_layer") or "unknown",
                        _read(port / "rate"),
                    )
                )
            out.append(Device(dev.name, tuple(sorted(ports, key=lambda p: p.number))))
        return out
    except OSError:
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _pyverbs_devices() -> list[Device]:
    """Devices through an importable pyverbs; none where get_device_list raises (no RDMA support)."""
    import pyverbs.device as d

    try:
        listed = d.get_device_list()
    except Exception:  # PyverbsRDMAError where the kernel has no RDMA support
        return []
    out = []
    for dev in listed:
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        ports: list[Port] = []
        try:
            with d.Context(name=name) as ctx:
                for n in range(1, ctx.query_device().phys_port_cnt + 1):
                    attr = ctx.query_port(n)
                    ports.append(
                        Port(
                            n,
                            _PORT_STATES.get(attr.state, str(attr.state)),
                            _LINK_LAYERS.get(attr.link_layer, str(attr.link_layer)),
                            f"mtu {_MTU_BYTES.get(attr.active_mtu, attr.active_mtu)}",
                        )
                    )
        except Exception as exc:
            ports.append(Port(0, f"unqueryable: {exc}", "unknown"))
        out.append(Device(name, tuple(ports)))
    return out
