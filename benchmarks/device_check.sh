#!/usr/bin/env bash
# The GPU checks of the sweep and search engines as one short run (every step has a time limit; the limits sum
# to 460 s, under 8 minutes): the sweep tests that compare against brute force (with float tolerances in ulps),
# the sub-grid search tests (exact against brute force, reaching the sweep's optimum, --seconds), then the
# benchmarks as JSON with the device name: throughput (with the fused-FMA ceiling), search vs sweep designs/s,
# and the 1e10 sweep. Results go to $OUT (or ./device-results). Needs JAX with CUDA and sax_jax's
# dependencies importable (e.g. wheels installed to a --target folder on PYTHONPATH); sax_jax itself runs from
# this checkout. On a machine without a GPU it runs the same steps on the CPU (slower; limits may cut them).
#
#     bash benchmarks/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-device-results}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 - <<'PY' | tee "$out/devices.txt"
import jax
print(jax.__version__, jax.devices())
PY
run() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  timeout "$limit" "$@" > "$out/$name" 2> "$out/$name.err"; echo "rc=$?" >> "$out/$name.err"
  tail -c 2000 "$out/$name"
}
run sweep_tests.txt 120 python3 -m pytest -q -x tests/test_sweep.py -k "brute_force or alone or crowded"
run search_tests.txt 100 python3 -m pytest -q -x tests/test_search_subgrid.py -k "best_of or chunks or reaches"
run throughput.json 60 python3 benchmarks/throughput.py --json --repeat 3
run search_speed.json 60 python3 benchmarks/search_quality.py --speed-only --speed-budget 2e8 --json
run sweep_1e10.json 120 python3 benchmarks/sweep_1e9.py --max-designs 1e10 --json
