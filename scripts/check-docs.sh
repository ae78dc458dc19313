#!/usr/bin/env bash
# Keeps the documentation a user reads in shape (run by ctest as DocsTest.ReadmeLinksAndLayout):
#   - README.md has at most 200 lines (the figures belong in docs/BENCHMARKS.md);
#   - every relative Markdown link, [text](path) or [text](path#anchor), in README.md and
#     docs/**/*.md names a file or folder that exists (http(s) and mailto links and
#     #anchors within the page are not checked, nor links inside code);
#   - no doc names a path outside the repository (../shared/ and the like), in code or not:
#     the docs stand on their own;
#   - README.md's Layout section names every top-level folder of lib/ (as lib/NAME/) and
#     every entry of docs/ (a file by its name, a folder as NAME/).
# Prints each problem and exits 1, or prints one line and exits 0.
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
exec python3 - "$root" <<'EOF'
import os, re, sys

root = sys.argv[1]
MAX_README_LINES = 200
problems = []

readme_path = os.path.join(root, "README.md")
with open(readme_path, encoding="utf-8") as f:
    readme = f.read()
lines = readme.count("\n") + (0 if readme.endswith("\n") or not readme else 1)
if lines > MAX_README_LINES:
    problems.append(f"README.md has {lines} lines, more than {MAX_README_LINES}: "
                    "figures go to docs/BENCHMARKS.md, history to bench/results/ or docs/notes/")

# Markdown files to check: README.md and every .md under docs/.
docs = [readme_path]
for d, _, files in os.walk(os.path.join(root, "docs")):
    docs += [os.path.join(d, n) for n in sorted(files) if n.endswith(".md")]

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
def prose(text):
    """The text outside fenced code blocks and inline code spans, line numbers kept."""
    out, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[:3]
            elif m.group(1).startswith(fence):
                fence = None
            out.append("")
            continue
        out.append("" if fence else re.sub(r"`+[^`]*`+", "", line))
    return out

for path in docs:
    with open(path, encoding="utf-8") as f:
        text = f.read()
    rel = os.path.relpath(path, root)
    for n, line in enumerate(text.split("\n"), 1):
        if re.search(r"(^|[\s`(])\.\./shared/", line):
            problems.append(f"{rel}:{n}: names a path outside the repository (../shared/)")
    for n, line in enumerate(prose(text), 1):
        for target in LINK.findall(line):
            if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("#"):
                continue  # http(s), mailto, ...; an anchor within the page
            file_part = target.split("#", 1)[0].split("?", 1)[0]
            if not file_part:
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part))
            if not os.path.exists(dest):
                problems.append(f"{rel}:{n}: the link to {target} names no file "
                                f"({os.path.relpath(dest, root)} does not exist)")
            elif not os.path.realpath(dest).startswith(os.path.realpath(root) + os.sep):
                problems.append(f"{rel}:{n}: the link to {target} leaves the repository")

# The Layout section: from "## Layout" to the next heading of level 1 or 2.
m = re.search(r"^## Layout[ \t]*\n(.*?)(?=^#{1,2} |\Z)", readme, re.M | re.S)
if not m:
    problems.append("README.md has no '## Layout' section")
else:
    layout = m.group(1)
    lib = os.path.join(root, "lib")
    for name in sorted(os.listdir(lib)):
        if os.path.isdir(os.path.join(lib, name)) and f"lib/{name}/" not in layout:
            problems.append(f"README.md's Layout does not name lib/{name}/")
    docs_dir = os.path.join(root, "docs")
    for name in sorted(os.listdir(docs_dir)):
        if name.startswith("."):
            continue
        want = name + "/" if os.path.isdir(os.path.join(docs_dir, name)) else name
        if not re.search(r"(?<![\w./-])" + re.escape(want) + r"(?![\w-])", layout):
            problems.append(f"README.md's Layout does not name docs/{want}")

for p in problems:
    print("check-docs: " + p)
if problems:
    sys.exit(1)
print(f"check-docs: README.md has {lines} lines; every link in README.md and docs/ resolves; "
      "the layout names every lib/ folder and docs/ file")
EOF
