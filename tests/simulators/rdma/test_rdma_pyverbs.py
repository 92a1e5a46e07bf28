"""The RDMA path without a device: import-free detection, the one-line error, and the shared
executor driven by an in-memory transport and by `RdmaTransport` over an emulated pyverbs.

The emulator below follows the pyverbs calls `RdmaTransport` makes (class names and arguments as
in linux-rdma/rdma-core pyverbs/ and tests/base.py) and moves bytes with memmove between the
registered addresses, checking keys and bounds, so the rendezvous protocol, the work-request ids
and the completion handling run for real; only the NIC is simulated.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import time
import types
from collections import Counter, deque

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.rdma import (
    OPS,
    MismatchError,
    Plan,
    RdmaTransport,
    Request,
    TcpTransport,
    Traffic,
    Transport,
    devices,
    replay,
    run_rank,
    transport_of,
)
from simulators.rdma._executor import check_results, pattern
from tests.simulators.rdma.conftest import run_threads

# ---------------------------------------------------------------- detection without pyverbs

needs_no_rdma = pytest.mark.skipif(devices().usable, reason="this machine has a usable RDMA device")


def test_importing_the_package_loads_neither_pyverbs_nor_ray():
    code = "import sys, simulators.rdma; print('pyverbs' in sys.modules, 'ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@needs_no_rdma
def test_devices_reports_what_is_missing():
    report = devices()
    if not report.pyverbs:
        assert report.pyverbs_error and "pyverbs" in report.pyverbs_error
    assert "pyverbs:" in report.describe() and "/sys/class/infiniband" in report.describe()


def test_devices_reads_sysfs_ports_and_link_state(tmp_path):
    for dev, port, state, layer in (("mlx5_0", 1, "4: ACTIVE", "InfiniBand"), ("mlx5_1", 1, "1: DOWN", "Ethernet")):
        d = tmp_path / dev / "ports" / str(port)
        d.mkdir(parents=True)
        (d / "state").write_text(state + "\n")
        (d / "link_layer").write_text(layer + "\n")
        (d / "rate").write_text("400 Gb/sec (4X NDR)\n")
    report = devices(tmp_path)
    assert report.sysfs == "mlx5_0, mlx5_1"
    if not report.pyverbs:  # devices come from sysfs
        assert [(d.name, d.ports[0].state, d.ports[0].link_layer) for d in report.devices] == [
            ("mlx5_0", "ACTIVE", "InfiniBand"),
            ("mlx5_1", "DOWN", "Ethernet"),
        ]
        assert report.active_ports == [("mlx5_0", 1)] and not report.usable
    assert devices(tmp_path / "absent").sysfs == "absent"


@needs_no_rdma
def test_asking_for_rdma_without_a_device_is_one_line_listing_what_was_found():
    with pytest.raises(SpecError) as err:
        transport_of("rdma")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("rdma: ") and msg.endswith("allowed here: tcp")
    assert "pyverbs: " in msg and "/sys/class/infiniband: " in msg
    with pytest.raises(SpecError, match="allowed here: tcp"):
        replay("all_reduce", "rdma", 2, 64)


def test_rdma_transport_implements_the_interface_without_importing_pyverbs():
    assert issubclass(RdmaTransport, Transport) and not RdmaTransport.__abstractmethods__
    RdmaTransport(device="mlx5_0", gid_index=3)  # constructing touches no pyverbs
    assert "pyverbs" not in sys.modules or devices().pyverbs
    assert transport_of("tcp") is TcpTransport


# ---------------------------------------------------------------- one executor, many transports


class MemoryTransport(Transport):
    """Queues between threads; `flip` = (src, dst, nth message, offset) corrupts one in flight."""

    kind = "memory"

    def __init__(self, hub, flip=None, timeout_s=10.0):
        self.hub, self.flip, self.timeout_s, self.sent, self.pending = hub, flip, timeout_s, 0, {}
        self.messages = Counter()  # messages sent so far, per peer

    def open(self, rank, world):
        self.rank, self.world = rank, world
        return rank

    def connect(self, book):
        assert list(book) == list(range(self.world))

    def isend(self, peer, buf, imm=0):
        data = buf.copy()
        if self.flip is not None and self.flip[:3] == (self.rank, peer, self.messages[peer]) and data.size:
            data[self.flip[3]] ^= 1
        self.messages[peer] += 1
        self.hub[(self.rank, peer)].put_nowait((data, imm))
        self.sent += buf.nbytes
        req = Request(self, peer, buf.nbytes)
        req.done = True
        return req

    def irecv(self, peer, buf):
        req = Request(self, peer, buf.nbytes)
        self.pending.setdefault(peer, deque()).append((req, buf))
        return req

    def wait(self, request):
        queue = self.pending[request.peer]
        while not request.done:  # complete in posting order, as the contract says
            req, buf = queue.popleft()
            data, imm = self.hub[(req.peer, self.rank)].get(timeout=self.timeout_s)
            assert data.size == buf.size
            buf[:] = data
            req.imm, req.done = imm, True

    def close(self):
        pass


def run_plan(world, make_transport, plan):
    """run_rank on `world` threads; returns (results per rank, transports, errors)."""
    transports = [make_transport(r) for r in range(world)]
    results, errors = run_threads(transports, lambda r, t: run_rank(r, t, plan))
    return results, transports, errors


def memory_hub(world):
    import queue

    return {(a, b): queue.Queue() for a in range(world) for b in range(world)}


@pytest.mark.parametrize("world", [2, 3, 5])
def test_executor_runs_every_op_over_an_in_memory_transport(world):
    hub = memory_hub(world)
    plan = Plan(world, tuple(Traffic(op, world * 4 * 24, bucket_bytes=world * 4 * 8) for op in OPS), checksum="all")
    results, transports, errors = run_plan(world, lambda r: MemoryTransport(hub), plan)
    assert not errors
    for t in range(len(OPS)):
        check_results(plan, t, [results[r][t].result for r in range(world)])
    assert all(t.sent > 0 for t in transports)


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
@pytest.mark.parametrize("world", [2, 3, 4, 7])
def test_ring_and_tree_all_reduce_give_every_rank_the_sum_of_all_inputs(algorithm, world):
    """Each rank's input is its own pattern; every rank must end with their int32 sum (numpy,
    wrapping like the replay), whichever algorithm's schedule moved the bytes."""
    hub, nbytes = memory_hub(world), world * 8 * 16
    plan = Plan(world, (Traffic("all_reduce", nbytes, algorithm=algorithm),), checksum="all", seed=9)
    results, transports, errors = run_plan(world, lambda r: MemoryTransport(hub), plan)
    assert not errors
    total = sum(pattern(9, 0, r, 0, nbytes).view(np.int32).astype(np.int64) for r in range(world))
    for r in range(world):
        np.testing.assert_array_equal(results[r][0].result.view(np.int32), total.astype(np.int32))
    # per run (a warm-up and a timed one; barriers send nothing): the ring's n ranks send 2(n-1)/n S
    # each, the two trees S/2 up and down each of their n - 1 edges: 2(n-1) S both
    assert sum(t.sent for t in transports) == 2 * 2 * (world - 1) * nbytes


def test_executor_catches_a_corruption_in_flight_through_the_checksum():
    world, hub = 3, memory_hub(3)
    plan = Plan(world, (Traffic("all_reduce", 3 * 4 * 10),), warmup=1, checksum="warmup")
    # Rank 0 -> rank 1 carries barrier messages first (2 rounds: k=1 only to rank 1), then step 0.
    flip = (0, 1, 1, 3)
    results, _, errors = run_plan(world, lambda r: MemoryTransport(hub, flip if r == 0 else None, 1.0), plan)
    mismatches = [e for e in errors if isinstance(e, MismatchError)]
    assert mismatches and (mismatches[0].rank, mismatches[0].step, mismatches[0].offset) == (1, 0, 3)


# ---------------------------------------------------------------- RdmaTransport on emulated pyverbs

E = types.SimpleNamespace(
    IBV_QPT_RC=2,
    IBV_ACCESS_LOCAL_WRITE=1,
    IBV_ACCESS_REMOTE_WRITE=2,
    IBV_WR_RDMA_WRITE_WITH_IMM=1,
    IBV_WR_SEND=2,
    IBV_SEND_SIGNALED=2,
    IBV_WC_SUCCESS=0,
    IBV_WC_SEND=0,
    IBV_WC_RDMA_WRITE=1,
    IBV_WC_RECV=128,
    IBV_WC_RECV_RDMA_WITH_IMM=129,
)


class Fabric:
    def __init__(self):
        self.lock = threading.RLock()
        self.qps, self.mrs, self.next_qpn, self.next_key = {}, {}, 100, 1000

    def mr_range(self, key, addr, length, what):
        start, size = self.mrs[key]
        assert start <= addr and addr + length <= start + size, f"{what} outside MR {key}"


def make_pyverbs(fabric):
    """Modules named like pyverbs' with the classes and signatures RdmaTransport uses."""

    class PortAttr:
        state, link_layer, active_mtu, lid = 4, 2, 3, 0

    class DevAttr:
        phys_port_cnt = 1

    class Context:
        def __init__(self, name=None):
            assert name == "emu0"
            self.name = name

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.close()

        def query_device(self):
            return DevAttr()

        def query_port(self, port_num):
            assert port_num == 1
            return PortAttr()

        def query_gid(self, port_num, index):
            return GID("fe80:0000:0000:0000:0000:0000:0000:0001")

        def close(self):
            pass

    class Device:
        name = b"emu0"

    class PD:
        def __init__(self, ctx):
            self.ctx = ctx

    class WC:
        def __init__(self, wr_id, opcode, byte_len=0, imm_data=0, qp_num=0):
            self.wr_id, self.opcode, self.byte_len = wr_id, opcode, byte_len
            self.imm_data, self.qp_num = imm_data, qp_num
            self.status, self.vendor_err = E.IBV_WC_SUCCESS, 0

    class CQ:
        def __init__(self, context, cqe, cq_context=None, channel=None, comp_vector=0):
            self.cqe, self.entries = cqe, deque()

        def push(self, wc):
            assert len(self.entries) < self.cqe, "CQ overflow"
            self.entries.append(wc)

        def poll(self, num_entries=1):
            with fabric.lock:
                out = [self.entries.popleft() for _ in range(min(num_entries, len(self.entries)))]
                for wc in out:
                    if wc.opcode in (E.IBV_WC_SEND, E.IBV_WC_RDMA_WRITE):
                        fabric.qps[wc.qp_num].outstanding -= 1  # its send-queue slot is free again
            if not out:
                time.sleep(0.0002)  # let the other rank threads run (a NIC would work in parallel)
            return len(out), out

    class MR:
        def __init__(self, creator, length=0, access=0, address=None, implicit=False, **kwargs):
            assert isinstance(creator, PD) and address and access & E.IBV_ACCESS_REMOTE_WRITE
            with fabric.lock:
                fabric.next_key += 1
                self.lkey = self.rkey = fabric.next_key
                fabric.mrs[self.lkey] = (address, length)
            self.buf, self.length = address, length

        def close(self):
            fabric.mrs.pop(self.lkey, None)

    class SGE:
        def __init__(self, addr, length, lkey):
            self.addr, self.length, self.lkey = addr, length, lkey

    class RecvWR:
        def __init__(self, wr_id=0, num_sge=0, sg=None, next_wr=None):
            self.wr_id, self.sg = wr_id, [(s.addr, s.length, s.lkey) for s in sg]

    class SendWR:
        def __init__(self, wr_id=0, opcode=E.IBV_WR_SEND, num_sge=0, imm_data=0, sg=None, send_flags=2, next_wr=None):
            assert num_sge == 1 and len(sg) == 1
            self.wr_id, self.opcode, self.imm_data, self.send_flags = wr_id, opcode, imm_data, send_flags
            self.sg = [(s.addr, s.length, s.lkey) for s in sg]
            self.rdma = None

        def set_wr_rdma(self, rkey, addr):
            self.rdma = (rkey, addr)

    class QPCap:
        def __init__(self, max_send_wr=1, max_recv_wr=10, max_send_sge=1, max_recv_sge=1, max_inline_data=0):
            self.max_send_wr, self.max_recv_wr = max_send_wr, max_recv_wr

    class QPInitAttr:
        def __init__(self, qp_type=4, qp_context=None, scq=None, rcq=None, srq=None, cap=None, sq_sig_all=1):
            self.qp_type, self.scq, self.rcq, self.cap = qp_type, scq, rcq, cap

    class QPAttr:
        def __init__(self, qp_state=1, cur_qp_state=0, port_num=1, path_mtu=3):
            self.port_num, self.path_mtu, self.qp_access_flags = port_num, path_mtu, 0

    class GID:
        def __init__(self, val=None):
            self.val = val

        def __str__(self):
            return self.val

    class GlobalRoute:
        def __init__(self, dgid=None, flow_label=0, sgid_index=0, hop_limit=1, traffic_class=0):
            assert isinstance(dgid, GID)

    class AHAttr:
        def __init__(self, dlid=0, sl=0, src_path_bits=0, static_rate=0, is_global=0, port_num=1, gr=None):
            assert is_global == 1 and isinstance(gr, GlobalRoute)

    class QP:
        def __init__(self, creator, init_attr, qp_attr=None):
            assert init_attr.qp_type == E.IBV_QPT_RC and qp_attr.qp_access_flags & E.IBV_ACCESS_REMOTE_WRITE
            with fabric.lock:
                fabric.next_qpn += 1
                self.qp_num = fabric.next_qpn
                fabric.qps[self.qp_num] = self
            self.attr, self.state, self.remote = init_attr, "INIT", None
            self.recvq, self.backlog, self.outstanding = deque(), deque(), 0

        def to_rts(self, attr):
            assert attr.qp_access_flags & E.IBV_ACCESS_REMOTE_WRITE and attr.dest_qp_num in fabric.qps
            with fabric.lock:
                self.state, self.remote = "RTS", attr.dest_qp_num
                self._drain()

        def post_recv(self, wr, bad_wr=None):
            with fabric.lock:
                assert len(self.recvq) < self.attr.cap.max_recv_wr, "receive queue overflow"
                self.recvq.append(wr)
                self._drain()

        def post_send(self, wr, bad_wr=None):
            assert self.state == "RTS", "post_send before to_rts"
            with fabric.lock:
                self.outstanding += 1
                assert self.outstanding <= self.attr.cap.max_send_wr, "send queue overflow"
                addr, length, lkey = wr.sg[0]
                fabric.mr_range(lkey, addr, length, "local SGE")
                data = ctypes.string_at(addr, length)
                peer = fabric.qps[self.remote]
                assert peer.remote in (None, self.qp_num)
                if wr.opcode == E.IBV_WR_RDMA_WRITE_WITH_IMM:
                    rkey, raddr = wr.rdma
                    fabric.mr_range(rkey, raddr, length, "RDMA write")
                    ctypes.memmove(raddr, data, length)
                    peer._deliver(E.IBV_WC_RECV_RDMA_WITH_IMM, b"", length, wr.imm_data)
                    done = E.IBV_WC_RDMA_WRITE
                else:
                    assert wr.opcode == E.IBV_WR_SEND
                    peer._deliver(E.IBV_WC_RECV, data, length, 0)
                    done = E.IBV_WC_SEND
                if wr.send_flags & E.IBV_SEND_SIGNALED:
                    self.attr.scq.push(WC(wr.wr_id, done, length, 0, self.qp_num))

        def _deliver(self, opcode, data, length, imm):
            self.backlog.append((opcode, data, length, imm))  # the sender retries until we are ready
            self._drain()

        def _drain(self):
            while self.state == "RTS" and self.backlog and self.recvq:
                self._arrive(*self.backlog.popleft())

        def _arrive(self, opcode, data, length, imm):
            wr = self.recvq.popleft()
            if opcode == E.IBV_WC_RECV:
                addr, size, lkey = wr.sg[0]
                assert length <= size
                fabric.mr_range(lkey, addr, length, "receive SGE")
                ctypes.memmove(addr, data, length)
            self.attr.rcq.push(WC(wr.wr_id, opcode, length, imm, self.qp_num))

    mods = {
        "pyverbs": types.ModuleType("pyverbs"),
        "pyverbs.device": types.SimpleNamespace(Context=Context, get_device_list=lambda: [Device()]),
        "pyverbs.pd": types.SimpleNamespace(PD=PD),
        "pyverbs.cq": types.SimpleNamespace(CQ=CQ, WC=WC),
        "pyverbs.mr": types.SimpleNamespace(MR=MR),
        "pyverbs.qp": types.SimpleNamespace(QP=QP, QPCap=QPCap, QPInitAttr=QPInitAttr, QPAttr=QPAttr),
        "pyverbs.addr": types.SimpleNamespace(GID=GID, GlobalRoute=GlobalRoute, AHAttr=AHAttr),
        "pyverbs.wr": types.SimpleNamespace(SGE=SGE, SendWR=SendWR, RecvWR=RecvWR),
        "pyverbs.libibverbs_enums": types.SimpleNamespace(**vars(E)),
    }
    return mods


@pytest.fixture
def emulated_pyverbs(monkeypatch):
    fabric = Fabric()
    for name, mod in make_pyverbs(fabric).items():
        monkeypatch.setitem(sys.modules, name, mod)
    return fabric


def test_emulated_device_is_detected_and_rdma_is_allowed(emulated_pyverbs):
    report = devices()
    assert report.pyverbs and report.active_ports == [("emu0", 1)] and report.usable
    assert transport_of("rdma") is RdmaTransport


@pytest.mark.parametrize("world", [2, 4])
def test_rdma_transport_runs_the_shared_executor(emulated_pyverbs, world):
    plan = Plan(
        world,
        (Traffic("all_reduce", world * 4 * 64, bucket_bytes=world * 4 * 16), Traffic("all_to_all", world * 96)),
        iters=2,
        checksum="all",
    )
    results, transports, errors = run_plan(world, lambda r: RdmaTransport(depth=4, timeout_s=20), plan)
    assert not errors, errors
    for t in range(2):
        check_results(plan, t, [results[r][t].result for r in range(world)])
        assert all((results[r][t].step_s > 0).all() for r in range(world))
    assert all(t._ctx is None for t in transports)
    assert len(emulated_pyverbs.mrs) == world  # data buffers deregistered; one control region per rank left


def test_rdma_transport_keeps_order_with_more_messages_than_its_depth(emulated_pyverbs):
    n, size = 25, 40
    sent = np.arange(n * size, dtype=np.uint32).astype(np.uint8)
    got = np.zeros(n * size, dtype=np.uint8)

    def body(r, t):
        t.register(sent if r == 0 else got)
        if r == 0:
            reqs = [t.isend(1, sent[i * size : (i + 1) * size], imm=i) for i in range(n)]
        else:
            reqs = [t.irecv(0, got[i * size : (i + 1) * size]) for i in range(n)]
        return [q.wait() for q in reqs]

    imms, errors = run_threads([RdmaTransport(depth=3, timeout_s=20) for _ in range(2)], body, join_s=30)
    assert not errors, errors
    assert imms[1] == list(range(n))
    np.testing.assert_array_equal(got, sent)
