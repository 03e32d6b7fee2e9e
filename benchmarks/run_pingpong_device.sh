#!/bin/bash
# One call on an H200 for ping-pong of attention's consumer warpgroups (tegula.ws_pingpong): its gpu
# tests, bench_hopper's attention section (all 8 shapes, the default beside ws_pingpong, TileLang
# 0.1.15, cuDNN / flash SDPA, interleaved rounds), then ncu of one launch of the ping-pong kernel.
# Run from the tree's root with the peers archive in ../.peers. Everything lands in $OUT/pingpong.tgz.
OUT=${OUT:-out}; W=/tmp/pingpong; mkdir -p "$W/ncu" "$W/src"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
[ -f ../.peers/tilelang-0.1.15-cp312-site.tar.xz ] && mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
pip install -q --no-deps ../.wheels/einops-*.whl > /dev/null 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv > "$W/gpu.txt" 2>&1
timeout ${TEST_S:-60} python3 -m pytest -q -m gpu -p no:cacheprovider ${TESTS:-tests/backends/cuda/test_ws_pingpong.py} > "$W/pytest.log" 2>&1
echo "pytest rc=$?"; tail -3 "$W/pytest.log"
PYTHONPATH=/tmp/site:$PWD timeout ${BENCH_S:-160} python3 benchmarks/bench_hopper.py --only attention --out "$W/bench_hopper.json" \
  ${BENCH_ARGS:---attn-seq 4096,16384 --configs 1 --rounds 8 --skip mma_sync,wgmma_cpasync,no_ws,ws_overlap,before_overlap,no_block_order,ws_tma_prologue,no_pingpong} > "$W/bench_hopper.log" 2>&1
echo "bench_hopper rc=$?"; grep -v "^  " "$W/bench_hopper.log" | grep -v "^{" | grep -v TileLang | tail -26
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in ${CASES:-attn128-pp}; do
  PYTHONPATH=/tmp/site:$PWD timeout ${PER_S:-40} $NCU --nvtx --nvtx-include "prof/" --set full --clock-control none \
    --import-source yes -f -o "$W/ncu/$c" python3 benchmarks/profile_pairs.py $c tegula "$W/src" > "$W/ncu/$c.log" 2>&1
  echo "$c rc=$? $(grep -h '^RESULT' "$W/ncu/$c.log")"
  if [ -f "$W/ncu/$c.ncu-rep" ]; then
    $NCU --import "$W/ncu/$c.ncu-rep" --page details > "$W/ncu/$c.details.txt" 2>&1
    $NCU --import "$W/ncu/$c.ncu-rep" --page source --csv --print-source sass > "$W/ncu/$c.sass.csv" 2>/dev/null
    rm -f "$W/ncu/$c.ncu-rep"
  fi
done
tar -C /tmp -czf "$OUT/pingpong.tgz" pingpong
