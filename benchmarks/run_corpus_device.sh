#!/bin/bash
# One call on an H200: the gpu test of signed-integer wrapping, then bench_corpus.py (the corpus's
# headline kernels through tegula and TileLang 0.1.15, beside cuBLAS / SDPA). Run from the tree's
# root with the peers archive in ../.peers (or .peers) and the corpus in ../.conformance (or
# ../shared/conformance). Results under $OUT (or ./out): corpus.json, bench.log, pytest.log, gpu.txt.
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
for a in ../.peers .peers; do
  if [ -f $a/tilelang-0.1.15-cp312-site.tar.xz ]; then
    mkdir -p /tmp/site && tar -C /tmp/site -xJf $a/tilelang-0.1.15-cp312-site.tar.xz; break
  fi
done
timeout ${TEST_TIMEOUT:-120} python3 -m pytest -q -m gpu -p no:cacheprovider ${TESTS:-tests/language/test_kernels.py -k integer_wrap} > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -5 "$OUT/pytest.log"
PYTHONPATH=/tmp/site:$PWD timeout ${BENCH_TIMEOUT:-330} python3 benchmarks/bench_corpus.py --out "$OUT/corpus.json" --budget-s ${BUDGET_S:-300} ${BENCH_ARGS:-} > "$OUT/bench.log" 2>&1
echo "bench rc=$?"; grep -E "^\[|^\||^- " "$OUT/bench.log" | cut -c1-400 | tail -40
