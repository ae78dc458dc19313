"""Assembles one shardpack wheel from what scripts/build-wheels.sh built.

The wheel holds the Python package (python/shardpack), its extension, the `shardpack` CLI
as a script (pip puts it on PATH), and the licences of everything linked into them. Its
metadata comes from python/pyproject.toml and the root CMakeLists.txt's version, so the
wheel and `pip install ./python` describe the same package.

Usage (Python 3.11+: tomllib):
  python pack.py --repo . --extension _shardpack....so --cli shardpack \
      --tag cp39-cp39-manylinux_2_28_x86_64 --licenses DIR --out DIST

The archive adds nothing that varies from run to run: entries sorted, fixed timestamps and
permissions.
"""

import argparse
import base64
import hashlib
import io
import pathlib
import re
import sys
import tomllib
import zipfile

# 1980-01-01, the earliest time a zip entry can hold: no build's clock reaches the bytes.
FIXED_TIME = (1980, 1, 1, 0, 0, 0)


def project_version(repo: pathlib.Path) -> str:
    text = (repo / "CMakeLists.txt").read_text()
    match = re.search(r"project\(shardpack VERSION ([0-9]+\.[0-9]+\.[0-9]+)", text)
    if match is None:
        sys.exit("pack: no `project(shardpack VERSION x.y.z)` line in CMakeLists.txt")
    return match.group(1)


def metadata(project: dict, version: str, licence_files: list[str]) -> str:
    """Core metadata 2.1 of the [project] table (the fields pyproject.toml uses)."""
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {version}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        f"License: {project['license']['text']}",
    ]
    lines += [f"License-File: {name}" for name in licence_files]
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {dep}; extra == "{extra}"' for dep in deps]
    return "\n".join(lines) + "\n"


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=pathlib.Path, required=True)
    parser.add_argument("--extension", type=pathlib.Path, required=True)
    parser.add_argument("--cli", type=pathlib.Path, required=True)
    parser.add_argument("--tag", required=True, help="python-abi-platform, e.g. cp39-cp39-manylinux_2_28_x86_64")
    parser.add_argument("--licenses", type=pathlib.Path, required=True,
                        help="a folder of <library>/<licence files>")
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()

    pyproject = tomllib.loads((args.repo / "python" / "pyproject.toml").read_text())
    project = pyproject["project"]
    version = project_version(args.repo)
    name = project["name"]
    dist_info = f"{name}-{version}.dist-info"
    data_dir = f"{name}-{version}.data"

    files: dict[str, tuple[bytes, int]] = {}  # archive name -> (bytes, unix mode)
    package = args.repo / "python" / "shardpack"
    for path in sorted(package.glob("*.py")):
        files[f"shardpack/{path.name}"] = (path.read_bytes(), 0o644)
    files[f"shardpack/{args.extension.name}"] = (args.extension.read_bytes(), 0o755)
    files[f"{data_dir}/scripts/shardpack"] = (args.cli.read_bytes(), 0o755)

    licence_files = []
    for path in sorted(p for p in args.licenses.rglob("*") if p.is_file()):
        relative = path.relative_to(args.licenses).as_posix()
        files[f"{dist_info}/licenses/{relative}"] = (path.read_bytes(), 0o644)
        licence_files.append(relative)

    files[f"{dist_info}/METADATA"] = (metadata(project, version, licence_files).encode(), 0o644)
    wheel = ("Wheel-Version: 1.0\nGenerator: shardpack scripts/wheel/pack.py\n"
             f"Root-Is-Purelib: false\nTag: {args.tag}\n")
    files[f"{dist_info}/WHEEL"] = (wheel.encode(), 0o644)

    record = [record_line(n, data) for n, (data, _) in sorted(files.items())]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = (("\n".join(record) + "\n").encode(), 0o644)

    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{name}-{version}-{args.tag}.whl"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        # dist-info last, as the wheel spec recommends.
        for entry in sorted(files, key=lambda n: (n.startswith(dist_info), n)):
            data, mode = files[entry]
            info = zipfile.ZipInfo(entry, FIXED_TIME)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    target.write_bytes(buffer.getvalue())
    print(f"pack: {target} ({len(buffer.getvalue()) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
