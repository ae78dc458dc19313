"""The extension module as a shared object: it exports its initialiser and nothing else
(python/src/exports.map), so that the C++ runtime, the library and nanobind inside it
cannot stand in for another module's, whatever order they are imported in."""

import struct
import subprocess
import sys
import textwrap

import pytest

import shardpack._shardpack as extension

SHT_DYNSYM = 11
SHN_UNDEF = 0
STB_LOCAL = 0
STV_DEFAULT = 0
STV_PROTECTED = 3


def exported_symbols(path):
    """The names an ELF64 little-endian shared object defines for other objects: its
    .dynsym entries that are defined, not local and of default or protected visibility."""
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not ELF64 LE"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)
    ]
    names = []
    for _, kind, _, _, offset, size, link, _, _, entsize in sections:
        if kind != SHT_DYNSYM:
            continue
        strtab = sections[link][4]
        for at in range(offset + entsize, offset + size, entsize):  # entry 0 is null
            name, info, other, shndx = struct.unpack_from("<IBBH", data, at)
            if shndx == SHN_UNDEF or info >> 4 == STB_LOCAL:
                continue
            if other & 3 not in (STV_DEFAULT, STV_PROTECTED):
                continue
            end = data.index(b"\0", strtab + name)
            names.append(data[strtab + name : end].decode())
    return names


def test_extension_exports_only_its_initialiser():
    assert sorted(exported_symbols(extension.__file__)) == ["PyInit__shardpack"]


def test_reader_finds_what_an_object_exports():
    # The reader itself, on the libc this process runs: it exports malloc and free.
    names = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "libc.so" in path:
                names = set(exported_symbols(path))
                break
    assert "malloc" in names and "free" in names


def test_torch_imported_after_shardpack(dataset_path, tmp_path):
    # The order that showed two C++ runtimes freeing each other's memory where a toolchain
    # linked libstdc++ into the extension and exported it: shardpack first, then torch,
    # whose import and first tensors use std::locale and streams.
    pytest.importorskip("torch")
    code = textwrap.dedent(
        f"""
        import shardpack
        import torch
        loader = shardpack.Loader({str(dataset_path)!r}, batch_size=8, framework="torch")
        total = sum(int(x.shape[0]) for x, _ in loader)
        print(total, torch.tensor([1.5]).numpy().tolist(), repr(torch.zeros(2)))
        """
    )
    # From a folder of its own: `-c` puts the working folder first on sys.path, and
    # python/ holds the package's sources without the extension.
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[0]) > 0
