#!/usr/bin/env bash
# Checks that lib/ keeps its dependency order (docs/DESIGN.md, "Module map"): a file in
# lib/<module>/ includes headers of its own module and of modules listed before it, never
# of one listed after it (which would make a cycle). Public headers (shardpack/...) and
# system headers are free. Exits 1 naming every include that breaks the order.
# Usage: bash scripts/check-layers.sh   (run by .ci/run and the ctest LayersTest)
set -euo pipefail
cd "$(dirname "$0")/.."
order=(util io image format remote cuda read preview verify convert)
rank() {
  local i
  for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
bad=0
for dir in lib/*/; do
  module=$(basename "$dir")
  [ "$module" = include ] && continue
  own=$(rank "$module")
  if [ "$own" -lt 0 ]; then
    echo "check-layers: lib/$module/ is not in the module map (docs/DESIGN.md)"
    bad=1
    continue
  fi
  while IFS=: read -r file line text; do
    target=$(echo "$text" | sed -E 's/^#include "([a-z_]+)\/.*/\1/')
    t=$(rank "$target")
    [ "$t" -lt 0 ] && continue  # not a lib/ module (shardpack/, a generated header)
    if [ "$t" -gt "$own" ]; then
      echo "check-layers: $file:$line: $module/ includes $target/, which comes after it: $text"
      bad=1
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "$dir" --include='*.h' --include='*.cc' --include='*.cu' || true)
done
[ "$bad" -eq 0 ] && echo "check-layers: lib/ follows the module order: ${order[*]}"
exit "$bad"
