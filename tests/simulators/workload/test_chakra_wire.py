"""The Chakra trace encoder against bytes worked out by hand from the protobuf encoding spec
(key = field_number << 3 | wire_type; varints 7 bits a byte, low group first) and et_def.proto's
field numbers, and the reader against the writer."""

import pytest

from simulators._errors import WorkloadFormatError
from simulators.workload import ChakraNode, read_chakra_trace, write_chakra_trace
from simulators.workload._chakra import COMM_COLL_NODE, COMP_NODE, encode_metadata, encode_node
from simulators.workload._protobuf_wire import read_varint, varint


def test_varints_as_the_spec_spells_them():
    assert varint(0) == b"\x00"
    assert varint(1) == b"\x01"
    assert varint(150) == b"\x96\x01"  # the spec's own example
    assert varint(300) == b"\xac\x02"
    assert varint(-1) == b"\xff" * 9 + b"\x01"  # int64 -1: ten bytes of two's complement
    assert read_varint(b"\xac\x02", 0) == (300, 2)
    with pytest.raises(ValueError, match="64 bits"):
        varint(1 << 64)


def test_global_metadata_bytes():
    # GlobalMetadata.version = 1, a string: key 1<<3|2 = 0x0a, length 5, "1.0.0".
    assert encode_metadata("1.0.0") == b"\x0a\x051.0.0"


def test_a_compute_node_bytes():
    node = ChakraNode(
        id=3,
        name="f",
        type=COMP_NODE,
        data_deps=(1, 2),
        duration_ns=300,
        attrs=(("is_cpu_op", False), ("num_ops", 150)),
    )
    expected = (
        b"\x08\x03"  # id = 1, varint: 1<<3|0
        b"\x12\x01f"  # name = 2, length-delimited: 2<<3|2 = 0x12
        b"\x18\x04"  # type = 3: COMP_NODE = 4
        b"\x2a\x02\x01\x02"  # data_deps = 5, packed: 5<<3|2 = 0x2a, 2 bytes, 1 and 2
        b"\x38\xac\x02"  # duration_micros = 7: 7<<3|0 = 0x38, 300
        # attr = 10 (10<<3|2 = 0x52): AttributeProto{name = 1 "is_cpu_op", bool_val = 27 false}.
        # bool_val's key 27<<3|0 = 216 is the two-byte varint d8 01; a oneof member is written
        # even when false, so the feeder sees which type the value has.
        b"\x52\x0e\x0a\x09is_cpu_op\xd8\x01\x00"
        # attr: {name "num_ops", int64_val = 9 (key 0x48) 150}
        b"\x52\x0c\x0a\x07num_ops\x48\x96\x01"
    )
    assert encode_node(node) == expected


def test_a_collective_node_bytes():
    node = ChakraNode(id=0, name="", type=COMM_COLL_NODE, attrs=(("comm_size", 1), ("pg_name", "tp:0")))
    # id 0 and the empty name are proto3 defaults, left out; type 7; comm_size int64_val (9);
    # pg_name string_val = 29 (key 29<<3|2 = 234 = ea 01).
    expected = b"\x18\x07" + b"\x52\x0d\x0a\x09comm_size\x48\x01" + b"\x52\x10\x0a\x07pg_name\xea\x01\x04tp:0"
    assert encode_node(node) == expected


def test_a_trace_reads_back_as_written(tmp_path):
    nodes = [
        ChakraNode(0, "a", COMP_NODE, (), 5, (("is_cpu_op", False), ("num_ops", 2**40), ("tensor_size", 2**33))),
        ChakraNode(1, "b", COMM_COLL_NODE, (0,), 0, (("comm_type", 7), ("comm_size", 64), ("pg_name", "dp:0"))),
        ChakraNode(2, "c", 5, (0, 1), 0, (("comm_src", 0), ("comm_dst", 4), ("comm_tag", 9))),
    ]
    path = tmp_path / "x.0.et"
    write_chakra_trace(path, nodes)
    # framing: the metadata's length, then its bytes, first
    assert path.read_bytes()[:8] == b"\x07\x0a\x051.0.0"
    assert read_chakra_trace(path) == ("1.0.0", nodes)


def test_an_int32_attribute_out_of_range_is_refused():
    with pytest.raises(WorkloadFormatError, match=r"comm_tag=2147483648: must fit int32"):
        encode_node(ChakraNode(0, "s", 5, attrs=(("comm_tag", 2**31),)))


def test_a_file_that_is_not_a_trace_names_itself(tmp_path):
    path = tmp_path / "junk.et"
    path.write_bytes(b"\x05ab")
    with pytest.raises(WorkloadFormatError, match="junk.et: not a Chakra trace"):
        read_chakra_trace(path)
