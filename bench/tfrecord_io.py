"""Minimal TFRecord + tf.train.Example reading for the benchmarks (no TensorFlow, no protobuf).

TFRecord framing (docs/FORMAT.md section 1): u64 length LE, u32 masked crc32c(length bytes),
payload, u32 masked crc32c(payload); mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8.
The Example is parsed from the protobuf wire format by hand: enough for the features that
shardpack and bench/pillow_convert.py write (bytes and int64 lists, packed or not).

Works with any Python 3 (only the standard library); CRC checking needs a crc32c function,
passed in by the caller (e.g. crc32c.crc32c from PyPI), and is skipped without one.
"""
import struct

MASK_DELTA = 0xA282EAD8


def mask_crc(crc):
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def read_records(path, crc32c=None):
    """Yields each record's payload (a memoryview into the file's bytes, read whole)."""
    with open(path, "rb") as f:
        data = f.read()
    view = memoryview(data)
    size, pos = len(data), 0
    while pos < size:
        if size - pos < 12:
            raise ValueError(f"{path}: truncated header at offset {pos}")
        (length,) = struct.unpack_from("<Q", data, pos)
        (length_crc,) = struct.unpack_from("<I", data, pos + 8)
        if crc32c is not None and mask_crc(crc32c(data[pos:pos + 8])) != length_crc:
            raise ValueError(f"{path}: bad length crc at offset {pos}")
        start, end = pos + 12, pos + 12 + length
        if end + 4 > size:
            raise ValueError(f"{path}: truncated record at offset {pos}")
        payload = view[start:end]
        if crc32c is not None:
            (data_crc,) = struct.unpack_from("<I", data, end)
            if mask_crc(crc32c(payload)) != data_crc:
                raise ValueError(f"{path}: bad data crc at offset {pos}")
        yield payload
        pos = end + 4


def _varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf):
    """Yields (field number, wire type, value) of one message; LEN values as memoryviews."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def parse_example(payload):
    """Returns {key: list of bytes (memoryviews) or list of ints} of a tf.train.Example."""
    buf = memoryview(payload)
    features = {}
    for number, wire, features_msg in _fields(buf):
        if number != 1 or wire != 2:
            continue
        for n2, w2, entry in _fields(features_msg):
            if n2 != 1 or w2 != 2:
                continue
            key, feature = None, None
            for n3, w3, v in _fields(entry):
                if n3 == 1:
                    key = bytes(v).decode("utf-8", "replace")
                elif n3 == 2:
                    feature = v
            values = []
            for kind, _, lst in _fields(feature if feature is not None else b""):
                for n5, w5, v in _fields(lst):
                    if kind == 1:  # BytesList
                        values.append(v)
                    elif kind == 3:  # Int64List, packed or not
                        if w5 == 2:
                            p = 0
                            while p < len(v):
                                x, p = _varint(v, p)
                                values.append(x)
                        else:
                            values.append(v)
            features[key] = values
    return features
