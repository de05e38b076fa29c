#!/usr/bin/env bash
# Replay every bundled scenario under many seeds on the simulator, then a few on
# real threads: the wide sweep the default test run samples.
#   tools/sweep.sh [SEEDS]     (default 0..199)
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="${1:-0..199}"
mapfile -t files < <(find scenarios -name '*.yaml' | sort)
gliding-actors replay "${files[@]}" --seeds "$seeds" | tail -n 1
gliding-actors replay "${files[@]}" --runtime threads --seeds 0..4 | tail -n 1
