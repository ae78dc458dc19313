#!/usr/bin/env bash
# Checks that lib/ keeps its dependency order (docs/DESIGN.md, "Module map"): a file in
# lib/<module>/ includes headers of its own module and of modules listed before it, never
# of one listed after it (which would make a cycle). Each public header (shardpack/...)
# belongs to a module too (the table below): a file may include it only where it may
# include that module's own headers, and a public header includes only public headers of
# its module or of modules before it, never an internal one. System headers are free.
# Exits 1 naming every include that breaks the order, and every public header missing
# from the table.
# Usage: bash scripts/check-layers.sh   (run by .ci/run and the ctest LayersTest)
set -euo pipefail
cd "$(dirname "$0")/.."
order=(util io image format remote cuda read preview verify convert)
declare -A public=(
  [status.h]=util [limits.h]=util
  [resize_filter.h]=image
  [manifest.h]=format [sample.h]=format [write_method.h]=format [shard_writer.h]=format
  [remote.h]=remote
  [dataset.h]=read [loader.h]=read
  [verify.h]=verify
  [convert.h]=convert
)
rank() {
  local i
  for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
bad=0
for header in lib/include/shardpack/*.h; do
  name=$(basename "$header")
  if [ -z "${public[$name]:-}" ]; then
    echo "check-layers: $header is in no module (add it to the table in scripts/check-layers.sh)"
    bad=1
  fi
done
# The module of an include's target ("format/example.h" or "shardpack/manifest.h"), or ""
# for something outside lib/ (a generated header).
target_module() {
  case "$1" in
    shardpack/*) echo "${public[${1#shardpack/}]:-?}" ;;
    *) local m=${1%%/*}; [ "$(rank "$m")" -ge 0 ] && echo "$m" || echo "" ;;
  esac
}
check_file() {  # file, its module, whether it is public
  local file=$1 module=$2 is_public=$3 own line text target t
  own=$(rank "$module")
  while IFS=: read -r line text; do
    target=$(echo "$text" | sed -E 's/^#include "([^"]+)".*/\1/')
    t=$(target_module "$target")
    [ -z "$t" ] && continue
    if [ "$t" = "?" ]; then
      echo "check-layers: $file:$line: includes $target, which is in no module"
      bad=1
    elif [ "$is_public" = yes ] && [[ "$target" != shardpack/* ]]; then
      echo "check-layers: $file:$line: a public header includes an internal one: $text"
      bad=1
    elif [ "$(rank "$t")" -gt "$own" ]; then
      echo "check-layers: $file:$line: $module/ includes $target ($t/), which comes after it"
      bad=1
    fi
  done < <(grep -nE '^#include "' "$file" || true)
}
for dir in lib/*/; do
  module=$(basename "$dir")
  [ "$module" = include ] && continue
  if [ "$(rank "$module")" -lt 0 ]; then
    echo "check-layers: lib/$module/ is not in the module map (docs/DESIGN.md)"
    bad=1
    continue
  fi
  while read -r file; do
    check_file "$file" "$module" no
  done < <(find "$dir" -name '*.h' -o -name '*.cc' -o -name '*.cu' | sort)
done
for header in lib/include/shardpack/*.h; do
  module=${public[$(basename "$header")]:-}
  [ -n "$module" ] && check_file "$header" "$module" yes
done
[ "$bad" -eq 0 ] && echo "check-layers: lib/ follows the module order, its public headers too: ${order[*]}"
exit "$bad"
