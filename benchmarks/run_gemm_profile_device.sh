#!/bin/bash
# One call on an H200 for the GEMM at 8192^3: clocks and power sampled while GEMM variants run in
# interleaved rounds (benchmarks/gemm_candidates.py: strip widths, tiles, stages, a short K, cuBLAS,
# TileLang), then one launch of tegula's and TileLang's fp16 8192^3 kernel under ncu --set full
# (benchmarks/run_profile_device.sh). Everything in $OUT/gemm-profile.tgz.
OUT=${OUT:-out}; R=/tmp/gemm-profile; mkdir -p "$OUT" $R
export PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
if [ -f ../.peers/tilelang-0.1.15-cp312-site.tar.xz ]; then
  mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv > $R/gpu.txt 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv -lms 250 > $R/smi.csv 2>&1 &
SMI=$!
PYTHONPATH=/tmp/site:$PWD timeout ${CAND_TIMEOUT:-70} python3 benchmarks/gemm_candidates.py --n ${N:-8192} --rounds ${ROUNDS:-3} \
  ${CAND_ARGS:-} --out $R/candidates.json > $R/candidates.log 2>&1
echo "candidates rc=$?"; grep "TFLOP/s\|Error\|error" $R/candidates.log | tail -20
kill $SMI
OUT=$R CASES=${CASES:-gemm16-8192} PER_S=${PER_S:-60} bash benchmarks/run_profile_device.sh > $R/profile.log 2>&1
echo "profile rc=$?"; grep "rc=" $R/profile.log
for f in $R/ncu/*.details.txt; do
  echo "== $f"; grep -E "^\s+(Duration|SM Frequency|Registers Per Thread|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|DRAM Throughput|Executed Ipc Active|Issue Slots Busy)" $f | head -12
done
tar -C /tmp --exclude="*.ncu-rep" -czf "$OUT/gemm-profile.tgz" gemm-profile
ls -la $OUT
