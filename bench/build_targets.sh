# Sourced by the bench scripts: build_targets TARGET... brings those CMake targets of
# $build up to date with the sources (the log in $out/build.log, shown on failure), or
# makes the build where it has none: scripts/build.sh for the default folder, a
# RelWithDebInfo configure for another. Needs the caller's $build, $out and die().
build_targets() {
  mkdir -p "$out"
  if [ -f "$build/CMakeCache.txt" ]; then
    cmake --build "$build" -j "$(nproc)" --target "$@" > "$out/build.log" 2>&1 ||
      { cat "$out/build.log"; die "building in $build failed"; }
  elif [ "$build" = build ]; then
    bash scripts/build.sh
  else
    { cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
      cmake --build "$build" -j "$(nproc)" --target "$@"; } > "$out/build.log" 2>&1 ||
      { cat "$out/build.log"; die "building in $build failed"; }
  fi
}
