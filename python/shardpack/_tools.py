"""convert, merge, verify and info: the CLI's commands as functions (docs/CLI.md)."""

import dataclasses
import json
import numbers
import os
from typing import List, Tuple

from shardpack import _shardpack
from shardpack._errors import InvalidArgumentError
from shardpack._util import INT32_MAX, UINT64_MAX, enum_member, integer, parsed_name

__all__ = [
    "convert",
    "merge",
    "verify",
    "info",
    "ConvertSummary",
    "MergeSummary",
    "VerifyReport",
    "VerifyFault",
]


@dataclasses.dataclass
class ConvertSummary:
    """What ``convert`` did (the fields of ``shardpack convert --json``): every input
    is accounted for, ``inputs == written + rejected``."""

    source: str
    dataset: str
    inputs: int
    written: int
    rejected: int
    hidden_ignored: int
    shards: int
    bytes: int  # bytes of shard files written
    bytes_in: int  # bytes of input files read (this run)
    seconds: float
    resumed_from: int  # inputs already done by an interrupted run (resume=True)
    rejects: List[Tuple[str, str]]  # (path relative to the source, reason)
    manifest: dict
    # resume=True found the dataset complete, of the same inputs and options
    already_complete: bool = False
    # Where the time went (``convert --stats``): "scan", "plan", "pipeline" and "publish"
    # in wall-clock seconds; "read", "decode", "resize", "encode", "write" and "idle" in
    # seconds summed over the pipeline's "threads" (docs/CLI.md).
    stages: dict = dataclasses.field(default_factory=dict)
    # How the TFRecord shards were written: "write" or "map" (write_method="auto"
    # resolved); "" where none was opened (LMDB, or a resumed run with nothing left)
    write_method: str = ""
    # dst s3://...: the staging directory used (removed once uploaded), and the objects
    # and bytes the upload sent, manifest.json included; with overwrite, the objects of
    # the replaced dataset that the new one does not list, deleted
    staging: str = ""
    uploaded_files: int = 0
    uploaded_bytes: int = 0
    deleted_objects: int = 0

    def __str__(self):
        if self.already_complete:
            return f"{self.dataset}: already complete (the same inputs and options)"
        rate = (self.inputs - self.resumed_from) / self.seconds if self.seconds > 0 else 0.0
        return (
            f"{self.dataset}: {self.inputs} inputs: {self.written} written, "
            f"{self.rejected} rejected; {len(self.manifest['classes'])} classes, "
            f"{self.shards} {self.manifest['backend']} shards; {self.bytes / 1e6:.1f} MB, "
            f"{self.seconds:.1f} s, {rate:.0f} images/s"
        )


@dataclasses.dataclass
class VerifyFault:
    """One fault: ``record`` and ``offset`` are -1 where they do not apply."""

    file: str
    record: int
    offset: int
    message: str
    text: str  # "<file>: record N at offset X: <message>", as the CLI prints it

    def __str__(self):
        return self.text


@dataclasses.dataclass
class VerifyReport:
    """What ``verify`` found (the fields of ``shardpack verify --json``)."""

    dataset: str
    ok: bool
    files: int
    records: int
    bytes: int
    seconds: float
    fault_count: int  # every fault found; ``faults`` may be capped per file
    faults: List[VerifyFault]

    def __bool__(self):
        return self.ok

    def __str__(self):
        rate = self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0
        noun = "fault" if self.fault_count == 1 else "faults"
        return (
            f"{self.dataset}: {'OK' if self.ok else 'FAULTS'}: {self.files} files, "
            f"{self.records} records, {self.bytes / 1e9:.3f} GB in {self.seconds:.2f} s "
            f"({rate:.2f} GB/s), {self.fault_count} {noun}"
        )


@dataclasses.dataclass
class MergeSummary:
    """What ``merge`` did (the fields of ``shardpack merge --json``). With faults in a
    part nothing is merged: ``ok`` is False and ``manifest`` is None."""

    dataset: str
    parts: int
    inputs: int
    written: int
    rejected: int
    already_merged: bool
    seconds: float
    faults: List[VerifyFault]
    manifest: dict

    @property
    def ok(self):
        return not self.faults

    def __bool__(self):
        return self.ok

    def __str__(self):
        if not self.ok:
            return f"{self.dataset}: {len(self.faults)} faults in the parts; nothing merged"
        if self.already_merged:
            return f"{self.dataset}: already merged: {self.manifest['num_samples']} samples"
        return (
            f"{self.dataset}: merged {self.parts} parts: {self.inputs} inputs: "
            f"{self.written} written, {self.rejected} rejected; "
            f"{len(self.manifest['shards'])} shards, {self.seconds:.1f} s"
        )


def _part(part):
    """(index, count) from (index, count) or the CLI's "I/N"."""
    if isinstance(part, str):
        try:
            index, count = (int(v) for v in part.split("/"))
        except ValueError:
            raise InvalidArgumentError(f'part "{part}": expected "I/N"') from None
    else:
        index, count = (int(v) for v in part)
    if not 0 <= index < count:
        raise InvalidArgumentError(f"part {index}/{count}: expected 0 <= I < N")
    return index, count


def _size(size):
    """(height, width) from an int, a (height, width) pair or the CLI's "WxH"."""
    if isinstance(size, str):
        try:
            width, height = (int(v) for v in size.lower().split("x"))
        except ValueError:
            raise InvalidArgumentError(f'size "{size}": expected "WIDTHxHEIGHT"') from None
        return height, width
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        side = integer(size, "size", 1, _shardpack.MAX_IMAGE_SIDE)
        return side, side
    try:
        height, width = size
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f'size must be an int, a (height, width) pair or "WIDTHxHEIGHT", not {size!r}'
        ) from None
    return integer(height, "size height", 1, _shardpack.MAX_IMAGE_SIDE), integer(width, "size width", 1, _shardpack.MAX_IMAGE_SIDE)


def _progress_bar(dst):
    """(callback, closable) drawing convert's progress: a tqdm bar when tqdm is
    installed, else one line on stderr redrawn in place."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(desc=f"convert {os.path.basename(dst) or dst}", unit="img", total=None)

        def update(p):
            bar.total = p["total"]
            bar.set_postfix(rejected=p["rejected"], refresh=False)
            bar.update(p["done"] - bar.n)

        return update, bar

    import sys

    class _Line:
        def __call__(self, p):
            rate = p["done"] / p["seconds"] if p["seconds"] > 0 else 0.0
            sys.stderr.write(
                f"\rconvert: {p['done']}/{p['total']} inputs, {p['rejected']} rejected, "
                f"{rate:.0f} images/s"
            )
            sys.stderr.flush()

        def close(self):
            sys.stderr.write("\n")

    line = _Line()
    return line, line


def _rgb(color):
    """(r, g, b) from "RRGGBB" or a triple."""
    if isinstance(color, str):
        if len(color) != 6:
            raise InvalidArgumentError(f'background "{color}": expected RRGGBB')
        return tuple(int(color[i : i + 2], 16) for i in (0, 2, 4))
    r, g, b = color
    return int(r), int(g), int(b)


def convert(
    src,
    dst,
    *,
    size=None,
    fit="crop",
    max_side=None,
    keep=False,
    format="tfrecord",
    lmdb_schema="example",
    input="auto",
    filter="lanczos3",
    channels=3,
    encoding="raw",
    quality=90,
    subsampling=420,
    png_compression=6,
    mixed_ratio=0.5,
    shard_size=64 << 20,
    shard_records=0,
    write_chunk=2 << 20,
    write_method="auto",
    shuffle=False,
    seed=0,
    threads=0,
    orient=True,
    background="ffffff",
    list_file=None,
    max_pixels=_shardpack.MAX_IMAGE_PIXELS,
    max_scans=500,
    max_png_chunk=8000000,
    max_file_size=1 << 30,
    strict=False,
    max_rejects=None,
    resume=False,
    overwrite=False,
    part=None,
    staging=None,
    progress=None,
):
    """Decodes and resizes a folder of JPEG/PNG class folders (or the files of
    ``list_file``) into a dataset at ``dst``, like ``shardpack convert``.

    Exactly one geometry: ``size`` (an int, (height, width), or the CLI's "WxH") with
    ``fit`` ("crop", "stretch" or "pad"), ``max_side``, or ``keep=True``. The other
    keywords are the CLI's flags (docs/CLI.md); ``shard_size`` and ``write_chunk``
    (``--write-chunk``, where the shards are written by pwrite: the default 2097152 writes
    them in 2 MiB chunks, 0 record by record) are in bytes, ``write_method`` is "auto", "write" or "map"
    (``--write-method``: how TFRecord shards are written, the same bytes every way),
    ``threads=0`` uses all cores, ``input`` is "auto", "folders" or "tfrecord",
    ``lmdb_schema`` "example" or "caffe" (with ``format="lmdb"``), ``encoding`` "raw",
    "jpeg" (at ``quality`` 1..100, ``subsampling`` 444, 422 or 420), "png" (deflated at
    zlib level ``png_compression`` 0..9; 1 is the fastest that compresses), or "mixed" (the
    JPEG where it is at most ``mixed_ratio`` of the raw bytes, else the raw pixels): how
    samples store the resized image (docs/FORMAT.md §2.5; :class:`Dataset` and
    :class:`Loader` decode encoded images). ``part=(i, n)`` (or
    "i/n") converts part i of n into ``dst/parts/`` as ``--part`` does; :func:`merge`
    joins the parts (docs/SCALE.md). ``dst`` may be "s3://bucket/prefix": the dataset is
    converted into ``staging`` (default: a directory under the cache directory), then
    uploaded with manifest.json last, and the staging directory removed; after a failed
    upload the same call again goes on (docs/REMOTE.md, "Writing to S3").
    ``progress=True`` shows a progress bar on stderr (tqdm's when tqdm is installed,
    else a line redrawn in place); a callable is called instead with a dict (done, total, rejected, bytes_in, bytes_out, seconds) at most ten
    times a second and at the end, from a converter thread.

    Returns a :class:`ConvertSummary`; bad inputs are listed in it and in
    ``dst/rejects.tsv`` and do not fail the call. Raises InvalidArgumentError for bad
    options, AlreadyExistsError when ``dst`` holds a dataset (``overwrite=True``
    replaces it), CorruptionError when ``strict`` and an input is rejected (or rejects
    pass ``max_rejects``), ShardpackIOError for I/O errors; then nothing is published.
    The call cannot be interrupted (Ctrl-C takes effect when it returns).
    """
    geometries = (size is not None) + (max_side is not None) + bool(keep)
    if geometries != 1:
        raise InvalidArgumentError("convert: give exactly one of size=, max_side= or keep=True")
    o = _shardpack.ConvertOptions()
    o.backend = enum_member(_shardpack.Backend, format, "format")
    if size is not None:
        o.height, o.width = _size(size)
        o.fit = parsed_name(_shardpack.parse_fit_mode, fit, "fit")
    elif max_side is not None:
        o.max_side = integer(max_side, "max_side", 1, _shardpack.MAX_IMAGE_SIDE)
    else:
        o.keep = True
    o.filter = parsed_name(_shardpack.parse_resize_filter, filter, "filter")
    o.channels = integer(channels, "channels", 1, 3)
    o.encoding = enum_member(_shardpack.ImageEncoding, encoding, "encoding")
    o.jpeg_quality = integer(quality, "quality", 1, 100)
    o.jpeg_subsampling = integer(subsampling, "subsampling", 420, 444)
    o.png_compression = integer(png_compression, "png_compression", 0, 9)
    if isinstance(mixed_ratio, bool) or not isinstance(mixed_ratio, numbers.Real) or not (
            0.0 < float(mixed_ratio) <= 1.0):
        raise InvalidArgumentError(f"mixed_ratio must be a number in (0, 1], not {mixed_ratio!r}")
    o.mixed_max_ratio = float(mixed_ratio)
    o.max_shard_bytes = integer(shard_size, "shard_size", 1, UINT64_MAX)
    o.max_shard_records = integer(shard_records, "shard_records", 0, UINT64_MAX)
    o.write_chunk_bytes = integer(write_chunk, "write_chunk", 0, 1 << 30)
    o.write_method = enum_member(_shardpack.WriteMethod, write_method, "write_method")
    o.shuffle = bool(shuffle)
    o.seed = integer(seed, "seed", 0, UINT64_MAX)
    o.num_threads = integer(threads, "threads", 0, _shardpack.MAX_THREADS)
    o.apply_orientation = bool(orient)
    o.background = list(_rgb(background))
    if list_file is not None:
        o.list_file = os.fspath(list_file)
    o.max_pixels = integer(max_pixels, "max_pixels", 1, _shardpack.MAX_IMAGE_PIXELS)
    o.max_scans = integer(max_scans, "max_scans", 1, INT32_MAX)
    o.max_png_chunk_bytes = integer(max_png_chunk, "max_png_chunk", 0, UINT64_MAX)
    o.max_file_bytes = integer(max_file_size, "max_file_size", 1, UINT64_MAX)
    o.strict = bool(strict)
    if max_rejects is not None:
        o.max_rejects = integer(max_rejects, "max_rejects", 0, UINT64_MAX)
    o.resume = bool(resume)
    o.overwrite = bool(overwrite)
    o.lmdb_schema = enum_member(_shardpack.LmdbSchema, lmdb_schema, "lmdb_schema")
    o.input_format = enum_member(_shardpack.InputFormat, input, "input")
    if part is not None:
        o.part_index, o.part_count = _part(part)
    if staging is not None:
        o.staging = os.fspath(staging)
    src, dst = os.fspath(src), os.fspath(dst)
    bar = None
    if progress is True:
        progress, bar = _progress_bar(dst)
    elif progress is False:
        progress = None
    elif progress is not None and not callable(progress):
        raise InvalidArgumentError(f"progress must be True, False or a callable, not {progress!r}")
    try:
        d = _shardpack.convert(src, dst, o, progress)
    finally:
        if bar is not None:
            bar.close()
    manifest = json.loads(d.pop("manifest_json"))
    return ConvertSummary(source=src, dataset=dst, manifest=manifest, **d)


def merge(dst, *, verify=True, threads=0):
    """Joins the parts of a partitioned conversion (``convert(..., part=(i, n))``) into
    one dataset in ``dst``, like ``shardpack merge``: every part checked and (unless
    ``verify=False``) verified, shards renamed into place, the manifest written last.
    Returns a :class:`MergeSummary`; faults in a part are in it (nothing merged).
    Raises NotFoundError for missing parts, FailedPreconditionError for unfinished
    ones, InvalidArgumentError for parts of different conversions (each named with the
    command that redoes it)."""
    dst = os.fspath(dst)
    d = _shardpack.merge(dst, bool(verify), int(threads))
    faults = [VerifyFault(*f) for f in d.pop("faults")]
    text = d.pop("manifest_json")
    return MergeSummary(dataset=dst, faults=faults, manifest=json.loads(text) if text else None, **d)


def verify(path, *, threads=0, max_faults_per_file=1000):
    """Checks a dataset like ``shardpack verify``: manifest, file checksums, every
    record's checksums, shapes, labels and index. Returns a :class:`VerifyReport`
    (``report.ok``; each fault names file, record and offset). Raises NotFoundError or
    CorruptionError only when the dataset cannot be read at all (no or a broken
    manifest); faults inside a readable dataset are in the report."""
    path = os.fspath(path)
    d = _shardpack.verify(path, int(threads), int(max_faults_per_file))
    faults = [VerifyFault(*f) for f in d.pop("faults")]
    return VerifyReport(dataset=path, faults=faults, **d)


def info(path):
    """The dataset's manifest as a dict plus ``total_bytes`` (shards and indexes), as
    ``shardpack info --json`` prints it. Raises NotFoundError without a manifest."""
    manifest = json.loads(_shardpack.read_manifest_json(os.fspath(path)))
    manifest["total_bytes"] = sum(
        s["bytes"] + (s["index"]["bytes"] if "index" in s else 0) for s in manifest["shards"]
    )
    return manifest
