#!/usr/bin/env bash
# The GPU checks of the sweep and search engines as one short run (every step has a time limit; the limits sum
# to 590 s, under one 10-minute device call): the sweep tests that compare against brute force (with float
# tolerances in ulps), the sub-grid and Pareto search tests (on an H200 on 2026-12-04 the first 4 passed in 90 s:
# compiles dominate), then the benchmarks as JSON with the device name: throughput
# (with the fused-FMA ceiling), search vs sweep designs/s, the 1e10 sweep, and three hard-suite scenarios.
# Results go to $OUT (or ./device-results), one file per step plus summary.txt (each step's exit status).
# Needs JAX with CUDA and sax_jax's dependencies importable (e.g. wheels installed to a --target folder on
# PYTHONPATH); sax_jax itself runs from this checkout.
#
#     bash benchmarks/device_check.sh           # on a GPU machine; without a GPU it says so and exits 0
#     bash benchmarks/device_check.sh --tiny    # every step at a tiny size on whatever device is there (CPU:
#                                               # proves the script runs; limits x LIMIT_SCALE, default 6 there:
#                                               # compiles on a few shared CPU cores take minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
tiny=0
for a in "$@"; do
  case "$a" in
    --tiny) tiny=1 ;;
    *) echo "usage: bash benchmarks/device_check.sh [--tiny]" >&2; exit 2 ;;
  esac
done
out="${OUT:-device-results}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
platform=$(timeout 120 python3 -c "import jax; print(jax.devices()[0].platform)" 2> "$out/devices.err")
if [ -z "$platform" ]; then
  echo "JAX does not start here (see $out/devices.err): nothing checked" | tee "$out/summary.txt"
  exit 1
fi
python3 -c "import jax; print(jax.__version__, jax.devices())" | tee "$out/devices.txt"
if [ "$platform" != "gpu" ] && [ "$platform" != "cuda" ] && [ $tiny -eq 0 ]; then
  echo "no GPU (platform: $platform): GPU checks skipped; run with --tiny for the CPU smoke run" \
    | tee "$out/summary.txt"
  exit 0
fi
: > "$out/summary.txt"
scale=${LIMIT_SCALE:-$([ $tiny -eq 1 ] && echo 6 || echo 1)}
only="${ONLY:-}"  # e.g. ONLY="search_tests.txt hard_suite.json" reruns just those steps
run() {  # name, seconds, command...: a step's output in $out/name, its stderr and exit status in name.err
  local name=$1 limit=$(( $2 * scale )) rc; shift 2
  if [ -n "$only" ] && [[ " $only " != *" $name "* ]]; then return; fi
  echo "== $name"
  timeout "$limit" "$@" > "$out/$name" 2> "$out/$name.err"; rc=$?
  echo "rc=$rc" >> "$out/$name.err"
  echo "$name rc=$rc$([ $rc -eq 124 ] && echo ' (time limit)')" >> "$out/summary.txt"
  tail -c 2000 "$out/$name"
}
if [ $tiny -eq 1 ]; then  # sizes that prove every step runs, not measurements
  space=1e6 sweep=1e7 budget=2e5 hard=(--scenarios h100-llama8b --fraction 1e-5)
  sweep_k="alone" search_k="rank or crowding or hypervolume or metric_names"
else
  space= sweep=1e10 budget=2e7 hard=(--scenarios h100-llama70b 2b-llama405b 4b-llama70b)
  sweep_k="brute_force or alone or crowded" search_k="best_of or chunks or reaches or covers or goodput"
fi
run sweep_tests.txt 100 python3 -m pytest -q -x -n 0 tests/test_sweep.py -k "$sweep_k"
run search_tests.txt 150 python3 -m pytest -q -x -n 0 tests/test_search_subgrid.py tests/test_search_pareto.py -k "$search_k"
# the island tests run on 4 host CPU devices (a ring needs more than one GPU): the CPU suite covers them, and they
# would spend device time on CPU work
run throughput.json 40 python3 benchmarks/throughput.py --json --repeat 3 ${space:+--max-designs $space}
run search_speed.json 90 python3 benchmarks/search_quality.py --speed-only --speed-budget "$budget" --json
run sweep_1e10.json 60 python3 benchmarks/sweep_1e9.py --max-designs "$sweep" --json
# needs the exact optima in sweeps/search_suite/ (git-ignored): carry that folder to the device machine, or the
# step first sweeps each listed scenario's 1.26e9 designs
run hard_suite.json 150 python3 benchmarks/search_quality.py --hard --json --no-speed \
  --methods evolution/de relaxed random "${hard[@]}"
echo "== summary"
cat "$out/summary.txt"
! grep -v "skipped" "$out/summary.txt" | grep -qv "rc=0$"
