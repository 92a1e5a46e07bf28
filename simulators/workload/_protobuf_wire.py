"""The protobuf wire format, as much of it as a Chakra trace needs, without the protobuf package.

A message is a run of fields; each field is a key, varint(field_number << 3 | wire_type), then its
value: a varint (wire type 0: uint64, int64, enum, bool; negatives as 10-byte two's complement),
or a varint length and that many bytes (wire type 2: string, bytes, a nested message, a packed
repeated scalar). Fixed-width (1, 5) and zigzag (sint) encodings are not used by the fields we
write, so the encoder refuses nothing it does not make; the decoder skips fixed-width fields so
that it reads files others wrote. Spec: https://protobuf.dev/programming-guides/encoding/.
"""

from __future__ import annotations

from collections.abc import Iterable

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5
_UINT64 = 1 << 64


def varint(value: int) -> bytes:
    """Little-endian base-128, 7 bits a byte, high bit set on all but the last byte."""
    if not -(1 << 63) <= value < _UINT64:
        raise ValueError(f"varint: {value} does not fit 64 bits")
    value %= _UINT64  # int64 negatives go out as their two's complement
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


def key(field_number: int, wire_type: int) -> bytes:
    return varint(field_number << 3 | wire_type)


def varint_field(field_number: int, value: int) -> bytes:
    """A uint64/int64/enum/bool field; proto3 leaves a zero out."""
    return key(field_number, VARINT) + varint(int(value)) if value else b""


def len_field(field_number: int, payload: bytes) -> bytes:
    """A string, bytes or nested-message field (written even when empty: presence can matter)."""
    return key(field_number, LEN) + varint(len(payload)) + payload


def string_field(field_number: int, text: str) -> bytes:
    """A proto3 string: left out when empty."""
    return len_field(field_number, text.encode()) if text else b""


def packed_varints(field_number: int, values: Iterable[int]) -> bytes:
    """A repeated scalar field, packed (proto3's default); nothing for an empty list."""
    payload = b"".join(varint(int(v)) for v in values)
    return len_field(field_number, payload) if payload else b""


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """(value, position after it); a ValueError on a truncated or over-long varint."""
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise ValueError("varint longer than 10 bytes")


def signed64(value: int) -> int:
    """An int64 read back from its varint (two's complement)."""
    return value - _UINT64 if value >= 1 << 63 else value


def read_fields(data: bytes) -> dict[int, list[int | bytes]]:
    """Field number -> its values in order: ints for varints, bytes for length-delimited and
    fixed-width fields (the caller knows which field is which)."""
    fields: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == VARINT:
            value, pos = read_varint(data, pos)
        elif wire_type == LEN:
            size, pos = read_varint(data, pos)
            value, pos = data[pos : pos + size], pos + size
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
            value, pos = data[pos : pos + size], pos + size
        else:
            raise ValueError(f"field {number}: wire type {wire_type} unsupported")
        if pos > len(data):
            raise ValueError(f"field {number}: runs past the end of the message")
        fields.setdefault(number, []).append(value)
    return fields


def unpack_varints(payload: bytes) -> list[int]:
    """The values of a packed repeated varint field."""
    values, pos = [], 0
    while pos < len(payload):
        value, pos = read_varint(payload, pos)
        values.append(value)
    return values


def delimited(message: bytes) -> bytes:
    """One message of a stream: its length as a varint, then its bytes (Chakra's protolib)."""
    return varint(len(message)) + message


def read_delimited(data: bytes) -> list[bytes]:
    """Every message of a length-delimited stream."""
    messages, pos = [], 0
    while pos < len(data):
        size, pos = read_varint(data, pos)
        if pos + size > len(data):
            raise ValueError(f"message at byte {pos}: {size} bytes announced, {len(data) - pos} left")
        messages.append(data[pos : pos + size])
        pos += size
    return messages
