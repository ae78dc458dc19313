"""Writes shardpack's source distribution, shardpack-<version>.tar.gz.

`pip install shardpack-<version>.tar.gz` builds it against the machine's own libraries
(the root CMakeLists.txt names any that are missing, with their packages) and installs the
Python package, its extension and the `shardpack` CLI, as the wheel does. The archive holds
what that build reads (the library, the CLI, the Python package: tracked files only), a
pyproject.toml at its root that runs python/CMakeLists.txt, and PKG-INFO.

Usage (Python 3.11+): python sdist.py --repo . --out DIST
"""

import argparse
import io
import pathlib
import subprocess
import sys
import tarfile
import tomllib

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from pack import metadata, project_version  # noqa: E402

# What the build reads: the root project (library and CLI) and the Python package.
INCLUDED = ["CMakeLists.txt", "README.md", "cmake", "lib", "tools", "python/CMakeLists.txt",
            "python/pyproject.toml", "python/src", "python/shardpack"]
FIXED_TIME = 315532800  # 1980-01-01, as in the wheels


def pyproject(python_pyproject: str) -> str:
    """The sdist's pyproject.toml: python/'s [project] tables, built from the root."""
    project_tables = python_pyproject[python_pyproject.index("[project]"):
                                      python_pyproject.index("[tool.")]
    return f'''# The source distribution's build (scripts/wheel/sdist.py): python/CMakeLists.txt, which
# adds the root project, against the libraries installed on this machine.
[build-system]
requires = [
  "scikit-build-core>=0.10",
  "nanobind>=2.4; python_version >= '3.10'",
  "nanobind>=2.4,<3; python_version < '3.10'",  # nanobind 3 needs Python 3.10
]
build-backend = "scikit_build_core.build"

{project_tables.rstrip()}

[tool.scikit-build]
minimum-version = "build-system.requires"
cmake.version = ">=3.25"
cmake.build-type = "Release"
cmake.source-dir = "python"
wheel.packages = ["python/shardpack"]
install.components = ["python"]
build.targets = ["_shardpack", "shardpack_cli"]
cmake.define.SHARDPACK_PYTHON_CLI = "ON"

[tool.scikit-build.metadata.version]
provider = "scikit_build_core.metadata.regex"
input = "CMakeLists.txt"
regex = 'project\\(shardpack VERSION (?P<value>[0-9]+\\.[0-9]+\\.[0-9]+)'
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=pathlib.Path, required=True)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    args = parser.parse_args()

    text = (args.repo / "python" / "pyproject.toml").read_text()
    project = tomllib.loads(text)["project"]
    version = project_version(args.repo)
    root = f"{project['name']}-{version}"
    files = subprocess.run(["git", "-C", str(args.repo), "ls-files", "-z", "--", *INCLUDED],
                           check=True, capture_output=True).stdout.decode().split("\0")
    entries: dict[str, tuple[bytes, int]] = {}
    for name in sorted(f for f in files if f):
        path = args.repo / name
        mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
        entries[f"{root}/{name}"] = (path.read_bytes(), mode)
    entries[f"{root}/pyproject.toml"] = (pyproject(text).encode(), 0o644)
    entries[f"{root}/PKG-INFO"] = (metadata(project, version, []).encode(), 0o644)

    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{root}.tar.gz"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for name, (data, mode) in sorted(entries.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, FIXED_TIME
            archive.addfile(info, io.BytesIO(data))
    target.write_bytes(buffer.getvalue())
    print(f"sdist: {target} ({len(buffer.getvalue()) / 1e6:.1f} MB, {len(entries)} files)")


if __name__ == "__main__":
    main()
