#!/bin/bash
# One call on an H200: the gpu tests of the sm_90a path, then bench_hopper.py (TileLang beside it
# when ../.peers holds its archive). Results under $OUT (or ./out).
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
if [ -f ../.peers/tilelang-0.1.15-cp312-site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
fi
timeout ${TEST_TIMEOUT:-200} python3 -m pytest -q -m gpu -p no:cacheprovider ${TESTS:-tests/backends/cuda/test_wgmma.py tests/backends/cuda/test_gpu_examples.py} > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -25 "$OUT/pytest.log"
PYTHONPATH=/tmp/site:$PWD timeout ${BENCH_TIMEOUT:-330} python3 benchmarks/bench_hopper.py --out "$OUT/bench.json" ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -v "^  " "$OUT/bench.log" | tail -40
if [ -n "${CONFORMANCE:-}" ] && [ -d .conformance ]; then  # TileLang's own examples, unchanged
  CONFORMANCE_OUT=/tmp/conf PER_S=${PER_S:-90} JOBS=${JOBS:-4} bash .conformance/run.sh gpu $CONFORMANCE > "$OUT/conformance.txt" 2>&1
  tail -12 "$OUT/conformance.txt"; tar -C /tmp -czf "$OUT/conformance-logs.tgz" conf
fi
