#!/bin/bash
# One call on an H200 for the warp-specialization work: the gpu tests of the sm_90a path, the
# corpus's warp_specialize examples (TileLang's own tests, tegula behind the name), then
# bench_ws.py (and bench_hopper.py sections given in HOPPER_ONLY). Results under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -m gpu -p no:cacheprovider -x ${TESTS:-tests/backends/cuda/test_warp_specialize.py tests/backends/cuda/test_wgmma.py tests/backends/cuda/test_tma.py} > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -15 "$OUT/pytest.log"
if [ -d ../.conformance ] && [ -z "${NO_CONFORMANCE:-}" ]; then
  CONFORMANCE_OUT=/tmp/conf PER_S=${PER_S:-120} JOBS=4 bash ../.conformance/run.sh gpu ${CONFORMANCE:-warp_specialize} > "$OUT/conformance.txt" 2>&1
  tail -8 "$OUT/conformance.txt"; tar -C /tmp -czf "$OUT/conformance-logs.tgz" conf
fi
[ -z "${NO_WS_BENCH:-}" ] && timeout ${BENCH_TIMEOUT:-200} python3 benchmarks/bench_ws.py --out "$OUT/bench_ws.json" ${WS_ARGS:-} > "$OUT/bench_ws.log" 2>&1
echo "bench_ws rc=$?"; tail -40 "$OUT/bench_ws.log"
if [ -n "${HOPPER_ONLY:-}" ]; then
  if [ -f ../.peers/tilelang-0.1.15-cp312-site.tar.xz ]; then
    mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
  fi
  PYTHONPATH=/tmp/site:$PWD timeout ${BENCH2_TIMEOUT:-200} python3 benchmarks/bench_hopper.py --only $HOPPER_ONLY --out "$OUT/bench_hopper.json" ${BENCH_ARGS:-} > "$OUT/bench_hopper.log" 2>&1
  echo "bench_hopper rc=$?"; grep -v "^  " "$OUT/bench_hopper.log" | tail -30
fi
