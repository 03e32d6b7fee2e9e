#!/bin/bash
# One call on an H200 for the FP8 GEMM: `bench_hopper.py --only fp8` (tegula beside torch._scaled_mm,
# one process), one launch of each kernel under Nsight Compute (benchmarks/profile_fp8.py), the
# fp8 `gpu` tests. Run from the tree's root; everything lands in $OUT/fp8.tgz.
OUT=${OUT:-out}; R=/tmp/fp8-out; mkdir -p $R/ncu
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $R/gpu.txt 2>&1
git log -1 --format=%H > $R/commit.txt 2>/dev/null
if [ -z "$NO_BENCH" ]; then
  timeout ${BENCH_S:-150} python3 benchmarks/bench_hopper.py --only fp8 --out $R/fp8.json $BENCH_ARGS > $R/bench.log 2>&1
  echo "bench rc=$?"
fi
if [ -z "$NO_NCU" ]; then
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout ${NCU_S:-90} $NCU --nvtx --nvtx-include "prof/" ${NCU_SECTIONS:---set full} --clock-control none -f -o $R/ncu/fp8 \
    python3 benchmarks/profile_fp8.py $PROFILE_ARGS > $R/ncu/fp8.log 2>&1
  echo "ncu rc=$?"
  [ -f $R/ncu/fp8.ncu-rep ] && $NCU --import $R/ncu/fp8.ncu-rep --page details > $R/ncu/fp8.details.txt 2>&1
  [ -f $R/ncu/fp8.ncu-rep ] && $NCU --import $R/ncu/fp8.ncu-rep --page raw --csv > $R/ncu/fp8.raw.csv 2>&1
fi
if [ -n "$TESTS" ]; then
  timeout ${TEST_S:-60} python3 -m pytest -q -m gpu $TESTS > $R/gpu-tests.txt 2>&1; echo "tests rc=$?"
  tail -3 $R/gpu-tests.txt
fi
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> $R/gpu.txt 2>&1
tar -C /tmp -czf $OUT/fp8.tgz fp8-out
[ -f $R/bench.log ] && grep -E "TFLOP|WRONG|Error|error" $R/bench.log | tail -40
[ -f $R/fp8.json ] && python3 - <<'PY'
import json
d = json.load(open("/tmp/fp8-out/fp8.json"))
for r in d["sections"]["fp8"].get("rows", []):
    print({k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()})
PY
