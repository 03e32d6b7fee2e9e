#!/bin/bash
# One call on an H200 for the GEMM work: the gpu tests of TMA stores, bench_hopper.py's GEMM
# section (the default beside the accumulator stored from registers, TileLang and cuBLAS), then fp16 against bf16 at
# 4096^3 in interleaved rounds with the SASS of each tegula kernel (REPEAT=0: not). Everything in $OUT/gemm.tgz.
OUT=${OUT:-out}; R=/tmp/gemm-out; mkdir -p "$OUT" $R
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
if [ -f ../.peers/tilelang-0.1.15-cp312-site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
fi
PYTHONPATH=$PWD timeout ${TEST_TIMEOUT:-60} python3 -m pytest -q -m gpu -p no:cacheprovider ${TESTS:-tests/backends/cuda/test_tma_store.py} > $R/pytest.log 2>&1
echo "pytest rc=$?"; tail -5 $R/pytest.log
PYTHONPATH=/tmp/site:$PWD timeout ${BENCH_TIMEOUT:-120} python3 benchmarks/bench_hopper.py --only gemm --skip ${SKIP:-mma_sync,wgmma_cpasync,no_ws,ws_plain,wgmma_overlap} --configs ${CONFIGS:-2} ${BENCH_EXTRA:-} --out $R/bench_hopper.json > $R/bench_hopper.log 2>&1
echo "bench_hopper rc=$?"; grep -v "TFLOP/s err\|^{" $R/bench_hopper.log | tail -${BENCH_TAIL:-12}
if [ "${REPEAT:-1}" != 0 ]; then
  PYTHONPATH=/tmp/site:$PWD timeout ${REPEAT_TIMEOUT:-60} python3 benchmarks/bench_gemm_repeat.py --n ${REPEAT_N:-4096} --rounds ${ROUNDS:-5} --out $R/repeat.json ${SASS:---sass $R/sass} > $R/repeat.log 2>&1
  echo "repeat rc=$?"; tail -10 $R/repeat.log
fi
tar -C /tmp -czf "$OUT/gemm.tgz" gemm-out
