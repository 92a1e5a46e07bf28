"""TCP end to end on loopback: local rank processes, every byte verified, times and bandwidths,
corruption caught with rank, step and offset; the transport itself full-duplex in threads, and
its handshake refusing strangers without stalling or aborting the run."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest

from simulators._errors import SpecError
from simulators.rdma import MismatchError, ReplayError, TcpTransport, Traffic, new_secret, replay, replay_many
from tests.simulators.rdma.conftest import run_threads

OPS3 = ("all_reduce", "all_gather", "all_to_all")


@pytest.mark.parametrize("world", [2, 4, 8])
def test_tcp_replay_verifies_every_byte(world):
    nbytes = world * 4 * 1024  # 4 KiB chunks per rank
    traffic = [Traffic(op, nbytes) for op in OPS3] + [Traffic("reduce_scatter", nbytes, bucket_bytes=nbytes // 2)]
    results = replay_many(traffic, "tcp", world, iters=2, checksum="all")
    for item, res in zip(traffic, results):
        steps = (2 if item.op == "all_reduce" else 1) * (world - 1) * res.buckets
        assert res.verified and res.op == item.op and res.ranks == world
        assert res.step_s.shape == (2, world, steps) and res.rank_s.shape == (2, world)
        assert (res.step_s > 0).all() and (res.rank_s > 0).all() and res.time_s > 0
        assert res.time_s == pytest.approx(float(np.median(res.rank_s.max(axis=1))))
        assert res.algbw_gbytes_per_s == pytest.approx(nbytes / res.time_s / 1e9)
        factor = 2 * (world - 1) / world if item.op == "all_reduce" else (world - 1) / world
        assert res.busbw_gbytes_per_s == pytest.approx(res.algbw_gbytes_per_s * factor)
        assert (
            res.step_bytes.sum()
            == {
                "all_reduce": 2 * (world - 1) * nbytes // world,
                "all_gather": (world - 1) * nbytes // world,
                "all_to_all": (world - 1) * nbytes // world,
                "reduce_scatter": (world - 1) * nbytes // world,
            }[item.op]
        )


def test_a_larger_message_moves_proportionally_more_bytes_per_step():
    # How time grows with size depends on the machine's load: measured in benchmarks/tcp_replay.py.
    small, large = replay_many([Traffic("all_reduce", 64 << 10), Traffic("all_reduce", 8 << 20)], "tcp", 2, iters=3)
    assert small.verified and large.verified
    assert large.step_bytes.sum() == 128 * small.step_bytes.sum()
    assert (small.step_s > 0).all() and (large.step_s > 0).all() and small.time_s > 0 and large.time_s > 0


def test_corrupted_byte_fails_the_step_checksum_with_rank_step_and_offset():
    with pytest.raises(MismatchError) as err:
        replay("all_reduce", "tcp", 4, 4 * 4 * 256, corrupt=(2, 4, 77))
    assert (err.value.rank, err.value.step, err.value.offset) == (2, 4, 77)
    assert "rank 2: all_reduce step 4" in str(err.value) and "fails its CRC32" in str(err.value)
    assert "chunk offset 77" in str(err.value)


def test_corrupted_byte_without_checksums_fails_the_final_check():
    # all_gather, 3 ranks of 64 B shares: rank 1 stores chunk 0 in step 0; byte 5 of it goes bad.
    with pytest.raises(MismatchError) as err:
        replay("all_gather", "tcp", 3, 3 * 64, corrupt=(1, 0, 5), checksum="off")
    assert (err.value.rank, err.value.step, err.value.offset) == (1, 0, 5)
    assert "result byte 5" in str(err.value) and "step 0" in str(err.value)


def test_bad_arguments_fail_before_any_process_starts():
    with pytest.raises(SpecError, match=r"nbytes: 1000 .* allowed: positive multiples of 16"):
        replay("all_reduce", "tcp", 4, 1000)
    with pytest.raises(SpecError, match=r"transport: 'ib' is unknown; allowed: tcp, rdma"):
        replay("all_gather", "ib", 2, 64)
    with pytest.raises(SpecError, match=r"checksum: 'some'"):
        replay("all_gather", "tcp", 2, 64, checksum="some")


def _pair(fn0, fn1, before=None, secrets=(None, None), **kw):
    """Two connected TcpTransports in threads (one run's secret unless `secrets` says otherwise);
    returns the transports, what fn0 and fn1 returned, and the errors."""
    shared = new_secret()
    transports = [TcpTransport(secret=own or shared, **kw) for own in secrets]
    out, errors = run_threads(transports, lambda r, t: (fn0, fn1)[r](t), join_s=30, before=before)
    return transports, out, errors


def _swap_one_byte(t):
    got = np.empty(1, dtype=np.uint8)
    t.sendrecv(1 - t.rank, np.full(1, t.rank, dtype=np.uint8), 1 - t.rank, got)
    return int(got[0])


def _stranger(send: bytes):
    """A `before` hook: a client that connects to rank 0 first and sends `send` (nothing: silent)."""
    strangers = []

    def connect(book):
        sock = socket.create_connection(tuple(book[0]), timeout=30)  # queued before any rank dials
        sock.sendall(send)
        strangers.append(sock)

    return connect, strangers


def test_tcp_a_fake_hello_is_refused_in_one_line_and_the_run_goes_on():
    fake = struct.pack("<I", 1) + bytes(32)  # claims to be rank 1, without the run's secret
    connect, strangers = _stranger(fake)
    transports, out, errors = _pair(_swap_one_byte, _swap_one_byte, before=connect)
    assert not errors and out == [1, 0]
    (line,) = transports[0].refused
    assert line.startswith("tcp: rank 0: refused a connection from 127.0.0.1:") and "without the run's secret" in line
    assert "\n" not in line
    strangers[0].settimeout(5)
    assert len(strangers[0].recv(64)) == 20 and strangers[0].recv(64) == b""  # challenged, then closed


def test_tcp_a_silent_connection_is_dropped_after_the_handshake_timeout_not_the_run_timeout():
    connect, _ = _stranger(b"")
    # 2 s, not less: the real peer's own handshake must fit in it on a busy machine too.
    transports, out, errors = _pair(
        _swap_one_byte, _swap_one_byte, before=connect, timeout_s=600, handshake_timeout_s=2.0
    )
    assert not errors and out == [1, 0]  # had it waited timeout_s, join_s (30 s) would have failed the test
    (line,) = transports[0].refused
    assert line.endswith(": no hello within 2 s")


def test_tcp_a_peer_with_another_secret_is_refused_and_the_rank_says_so():
    transports, _, errors = _pair(_swap_one_byte, _swap_one_byte, secrets=(None, new_secret()), timeout_s=2)
    assert "without the run's secret" in transports[0].refused[0]
    messages = sorted(str(e) for e in errors)
    assert "tcp: rank 1: rank 0 closed the connection during the handshake (another run's secret?)" in messages
    assert any("peers did not connect within 2 s; refused 1 connections" in m for m in messages)


def test_tcp_wants_a_secret():
    with pytest.raises(SpecError, match=r"tcp: secret must be at least 16 bytes"):
        TcpTransport(secret=b"short")


def test_tcp_full_duplex_exchange_larger_than_socket_buffers_does_not_deadlock():
    n = 16 << 20
    data = [np.random.default_rng(r).integers(0, 256, n, dtype=np.uint8) for r in range(2)]

    def swap(r):
        def fn(t):
            got = np.empty(n, dtype=np.uint8)
            imm = t.sendrecv(1 - r, data[r], 1 - r, got, imm=100 + r)
            return got, imm

        return fn

    _, out, errors = _pair(swap(0), swap(1), socket_buffer_bytes=64 << 10)
    assert not errors
    for r in range(2):
        np.testing.assert_array_equal(out[r][0], data[1 - r])
        assert out[r][1] == 100 + (1 - r)


def test_tcp_size_disagreement_is_an_error_not_a_hang():
    def send(t):
        t.send(1, np.zeros(10, dtype=np.uint8))

    def recv(t):
        t.recv(0, np.zeros(12, dtype=np.uint8))

    _, _, errors = _pair(send, recv, timeout_s=5)
    assert any(isinstance(e, ReplayError) and "sent 10 B" in str(e) and "12 B were posted" in str(e) for e in errors)


@pytest.mark.parametrize("world", [3, 4])
def test_tcp_replays_the_tree_and_the_ring_all_reduce_byte_for_byte(world):
    """The double binary tree's schedule over real sockets: every rank's result is checked against
    the numpy sum of all ranks' inputs (verified), as the ring's is; both move 2(n-1) S in all."""
    nbytes = world * 8 * 1024
    traffic = [Traffic("all_reduce", nbytes, algorithm=name) for name in ("tree", "ring")]
    tree, ring = replay_many(traffic, "tcp", world, checksum="all")
    assert (tree.algorithm, ring.algorithm) == ("double_binary_tree", "ring")
    assert tree.verified and ring.verified
    assert ring.step_bytes.sum() == 2 * (world - 1) * nbytes // world
    assert tree.step_s.shape[2] == len(tree.step_bytes) and (tree.step_bytes == nbytes // 2).all()
