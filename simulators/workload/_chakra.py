"""Chakra execution traces (ET): the subset of et_def.proto that ASTRA-sim reads, written and read
back without the protobuf package (`_protobuf_wire`).

A trace file holds one rank: a length-delimited GlobalMetadata, then one length-delimited Node
per operation (Chakra's protolib framing). ASTRA-sim names them `<prefix>.<rank>.et`. Field
numbers and enums follow mlcommons/chakra schema/protobuf/et_def.proto (read at 21585d8). The
attribute types are those Chakra's feeder reads (src/feeder/et_feeder_node.cpp): num_ops and
comm_type and comm_size as int64, tensor_size as uint64, comm_src/dst/tag as int32, is_cpu_op
as bool, pg_name as a string; another type would read as zero there.

Time: `duration_micros` carries nanoseconds. ASTRA-sim takes the field as its tick, the
nanosecond (Workload::issue_replay: "changed chakra to return nanoseconds"), and Chakra's own
text converter copies the text workload's ns into it; microseconds would replay 1000x fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulators._errors import WorkloadFormatError
from simulators.workload import _protobuf_wire as wire

# schema/protobuf/et_def.proto is unchanged from Chakra 0.0.4 to 1.0.0; its generator now writes 1.0.0.
CHAKRA_VERSION = "1.0.0"
COMP_NODE, COMM_SEND_NODE, COMM_RECV_NODE, COMM_COLL_NODE = 4, 5, 6, 7
COMM_TYPES = {"all_reduce": 0, "all_gather": 2, "all_to_all": 6, "reduce_scatter": 7}  # CollectiveCommType

# AttributeProto: name = 1, then the oneof value's field for each type we use.
_ATTR_FIELDS = {"int32": 7, "int64": 9, "uint64": 13, "bool": 27, "string": 29}
_ATTR_TYPES = {
    "is_cpu_op": "bool",
    "num_ops": "int64",
    "tensor_size": "uint64",
    "comm_type": "int64",
    "comm_size": "int64",
    "comm_src": "int32",
    "comm_dst": "int32",
    "comm_tag": "int32",
    "pg_name": "string",
}
_INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class ChakraNode:
    """One operation of one rank. `attrs` are (name, value) pairs from `_ATTR_TYPES`, in order;
    `data_deps` the ids of the nodes it waits for (the only dependencies Chakra's feeder obeys)."""

    id: int
    name: str
    type: int
    data_deps: tuple[int, ...] = ()
    duration_ns: int = 0
    attrs: tuple[tuple[str, int | bool | str], ...] = ()

    def attr(self, name: str, default: int | bool | str | None = None) -> int | bool | str | None:
        return next((value for key, value in self.attrs if key == name), default)


def _encode_attr(name: str, value: int | bool | str) -> bytes:
    kind = _ATTR_TYPES[name]
    if kind == "int32" and not 0 <= value <= _INT32_MAX:
        raise WorkloadFormatError(f"{name}={value}: must fit int32 (0 to {_INT32_MAX})")
    field = _ATTR_FIELDS[kind]
    # A oneof member is written even when zero: its presence says which type the value has.
    body = value.encode() if kind == "string" else wire.varint(int(value))
    value_bytes = wire.len_field(field, body) if kind == "string" else wire.key(field, wire.VARINT) + body
    return wire.string_field(1, name) + value_bytes


def encode_node(node: ChakraNode) -> bytes:
    """Node: id = 1, name = 2, type = 3, data_deps = 5 (packed), duration_micros = 7, attr = 10."""
    return b"".join(
        (
            wire.varint_field(1, node.id),
            wire.string_field(2, node.name),
            wire.varint_field(3, node.type),
            wire.packed_varints(5, node.data_deps),
            wire.varint_field(7, node.duration_ns),
            *(wire.len_field(10, _encode_attr(name, value)) for name, value in node.attrs),
        )
    )


def encode_metadata(version: str = CHAKRA_VERSION) -> bytes:
    """GlobalMetadata: version = 1."""
    return wire.string_field(1, version)


def chakra_trace_bytes(nodes: list[ChakraNode]) -> bytes:
    """A whole rank's file: the metadata, then the nodes, each length-delimited."""
    return wire.delimited(encode_metadata()) + b"".join(wire.delimited(encode_node(n)) for n in nodes)


def write_chakra_trace(path: Path, nodes: list[ChakraNode]) -> None:
    Path(path).write_bytes(chakra_trace_bytes(nodes))


def _decode_attr(payload: bytes) -> tuple[str, int | bool | str]:
    fields = wire.read_fields(payload)
    name = fields[1][0].decode() if 1 in fields else ""
    for kind, number in _ATTR_FIELDS.items():
        if number in fields:
            value = fields[number][0]
            if kind == "string":
                return name, value.decode()
            return name, bool(value) if kind == "bool" else wire.signed64(value) if kind == "int64" else value
    raise WorkloadFormatError(f"attribute {name!r}: no value of a type this reader knows")


def _repeated(values: list[int | bytes]) -> tuple[int, ...]:
    """A repeated uint64, packed (bytes) or not (ints)."""
    return tuple(v for value in values for v in (wire.unpack_varints(value) if isinstance(value, bytes) else [value]))


def decode_node(payload: bytes) -> ChakraNode:
    fields = wire.read_fields(payload)
    one = {number: values[-1] for number, values in fields.items()}
    return ChakraNode(
        id=one.get(1, 0),
        name=one[2].decode() if 2 in one else "",
        type=one.get(3, 0),
        data_deps=_repeated(fields.get(5, [])),
        duration_ns=one.get(7, 0),
        attrs=tuple(_decode_attr(attr) for attr in fields.get(10, [])),
    )


def read_chakra_trace(path: Path) -> tuple[str, list[ChakraNode]]:
    """(metadata version, nodes) of one rank's file; a WorkloadFormatError naming the file if it
    is not a Chakra trace."""
    try:
        messages = wire.read_delimited(Path(path).read_bytes())
        if not messages:
            raise ValueError("empty file")
        version = wire.read_fields(messages[0]).get(1, [b""])[0].decode()
        return version, [decode_node(message) for message in messages[1:]]
    except (ValueError, KeyError, AttributeError) as exc:
        raise WorkloadFormatError(f"{path}: not a Chakra trace ({exc})") from None
