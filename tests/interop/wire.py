"""Independent readers of shardpack's formats, from the specifications, in plain Python.

Nothing here uses shardpack's code, TensorFlow or the protobuf package: TFRecord framing
and CRC-32C (docs/FORMAT.md section 1), the protobuf wire format of tf.train.Example
(section 2) and of Caffe's Datum (section 4.1), written from the field numbers. The
tests compare what TensorFlow, DALI and python-lmdb give with what these give.
"""

import struct
import zlib

import numpy as np


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data) -> int:
    """CRC-32C (Castagnoli), as TFRecord and image/raw/crc32c use it."""
    c = 0xFFFFFFFF
    for b in bytes(data):
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the check value FORMAT.md gives


def masked_crc32c(data) -> int:
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def read_tfrecord(path):
    """Every record of a TFRecord file as (offset, payload); asserts both checksums."""
    data = open(path, "rb").read()
    records, pos = [], 0
    while pos < len(data):
        assert len(data) - pos >= 12, f"{path}: truncated header at {pos}"
        (length,) = struct.unpack_from("<Q", data, pos)
        (length_crc,) = struct.unpack_from("<I", data, pos + 8)
        assert length_crc == masked_crc32c(data[pos:pos + 8]), f"{path}: length crc at {pos}"
        payload = data[pos + 12:pos + 12 + length]
        (payload_crc,) = struct.unpack_from("<I", data, pos + 12 + length)
        assert payload_crc == masked_crc32c(payload), f"{path}: data crc at {pos}"
        records.append((pos, payload))
        pos += 16 + length
    return records


def frame_record(payload: bytes) -> bytes:
    header = struct.pack("<Q", len(payload))
    return (header + struct.pack("<I", masked_crc32c(header)) + payload +
            struct.pack("<I", masked_crc32c(payload)))


def _varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def fields(buf):
    """Yields (field_number, wire_type, value) of a protobuf message: ints for varints and
    fixed-width fields, memoryview slices for length-delimited ones."""
    buf = memoryview(buf)
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            (value,) = struct.unpack_from("<Q", buf, pos)
            pos += 8
        elif wire == 5:
            (value,) = struct.unpack_from("<I", buf, pos)
            pos += 4
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value = buf[pos:pos + n]
            pos += n
        else:
            raise ValueError(f"wire type {wire} at byte {pos}")
        yield number, wire, value


def parse_example(payload):
    """A tf.train.Example as {key: ("bytes", [values]) | ("int64", [values]) | ("float", n)},
    with protobuf's rules (later map entries win; packed or unpacked int64 lists)."""
    out = {}
    for number, wire, features in fields(payload):
        if number != 1 or wire != 2:
            continue
        for n2, w2, entry in fields(features):
            if n2 != 1 or w2 != 2:
                continue
            key, feature = None, b""
            for n3, w3, v in fields(entry):
                if n3 == 1:
                    key = bytes(v).decode()
                elif n3 == 2:
                    feature = v
            kind, values = None, []
            for n4, w4, lst in fields(feature):
                if n4 == 1:
                    kind = "bytes"
                    values = [bytes(v) for n5, w5, v in fields(lst) if n5 == 1]
                elif n4 == 3:
                    kind = "int64"
                    values = []
                    for n5, w5, v in fields(lst):
                        if w5 == 2:  # packed
                            p = 0
                            while p < len(v):
                                x, p = _varint(v, p)
                                values.append(x - (1 << 64) if x >> 63 else x)
                        else:
                            values.append(v)
                elif n4 == 2:
                    kind = "float"
            out[key] = (kind, values)
    return out


def parse_datum(value):
    """Caffe's Datum by its field numbers: channels 1, height 2, width 3, data 4, label 5,
    float_data 6, encoded 7."""
    d = {"float_data": 0}
    names = {1: "channels", 2: "height", 3: "width", 5: "label", 7: "encoded"}
    for number, wire, v in fields(value):
        if number in names:
            assert wire == 0, f"Datum field {number} has wire type {wire}"
            d[names[number]] = v
        elif number == 4:
            assert wire == 2
            d["data"] = bytes(v)
        elif number == 6:
            d["float_data"] += len(v) // 4 if wire == 2 else 1
    return d


def write_png(path, pixels: np.ndarray):
    """An 8-bit PNG of HWC (or HW) uint8 pixels: gray or RGB, filter 0, one IDAT."""
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    h, w, c = pixels.shape
    color = {1: 0, 3: 2}[c]
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body +
                struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 6)))
        f.write(chunk(b"IEND", b""))
