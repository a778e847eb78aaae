#!/usr/bin/env bash
# The GPU checks of the sweep engine as one short run (about 4 minutes on an H100/H200 plus compiles):
# the sweep tests that compare against brute force, then the three sweep benchmarks (JSON) with the device
# name. Results go to $OUT (or ./device-results). Needs JAX with CUDA and sax_jax's dependencies importable
# (e.g. wheels installed to a --target folder on PYTHONPATH); sax_jax itself runs from this checkout.
#
#     bash benchmarks/device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-device-results}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
python3 - <<'EOF' | tee "$out/devices.txt"
import jax
print(jax.__version__, jax.devices())
EOF
run() {  # name, seconds, command...
  local name=$1 limit=$2; shift 2
  echo "== $name"
  timeout "$limit" "$@" > "$out/$name" 2> "$out/$name.err"; echo "rc=$?" >> "$out/$name.err"
  tail -c 2000 "$out/$name"
}
run sweep_tests.txt 240 python3 -m pytest -q -x tests/test_sweep.py -k "brute_force or alone or crowded"
run throughput.json 120 python3 benchmarks/throughput.py --json
run calculon.json 120 python3 benchmarks/calculon_space.py --json
run sweep_1e10.json 200 python3 benchmarks/sweep_1e9.py --max-designs 1e10 --json
