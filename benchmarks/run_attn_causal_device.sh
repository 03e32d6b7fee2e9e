#!/bin/bash
# One call on an H200 for causal flash attention d128 on sm_90a: Nsight Compute (--set full, clocks
# left alone, one launch each) of tegula's two forms of the softmax overlap and of TileLang 0.1.15's
# kernel from the same source (benchmarks/profile_pairs.py; CUDA sources kept), the gpu tests of
# the attention path when TESTS is set, then bench_hopper.py's attention section (tegula's default
# beside the combinations of its attention passes, TileLang, cuDNN / flash SDPA).
# Run from the tree's root with the peers archive in ../.peers. Results: $OUT/attn-causal.tgz.
R=/tmp/attn-causal; mkdir -p $R/ncu $R/src
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
pip install -q --no-deps ../.wheels/einops-*.whl > /dev/null 2>&1
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader; } > $R/env.txt 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for n in ${PROFILES-attn128c:tegula attn128c-tma:tegula attn128c:tilelang}; do
  c=${n%%:*}; fw=${n##*:}
  PYTHONPATH=/tmp/site:$PWD timeout ${PER_S:-50} $NCU --nvtx --nvtx-include "prof/" --set full --import-source yes \
    --clock-control none -f -o $R/ncu/$c-$fw python3 benchmarks/profile_pairs.py $c $fw $R/src > $R/ncu/$c-$fw.log 2>&1
  echo "$c-$fw rc=$? $(grep -h '^RESULT' $R/ncu/$c-$fw.log)"
  [ -f $R/ncu/$c-$fw.ncu-rep ] && $NCU --import $R/ncu/$c-$fw.ncu-rep --page details > $R/ncu/$c-$fw.details.txt 2>&1
done
if [ -n "${TESTS:-}" ]; then
  timeout ${TEST_S:-60} python3 -m pytest -q -m gpu -p no:cacheprovider $TESTS > $R/pytest.log 2>&1
  echo "pytest rc=$?"; tail -3 $R/pytest.log
fi
PYTHONPATH=/tmp/site:$PWD timeout ${BENCH_S:-150} python3 benchmarks/bench_hopper.py --only attention --attn-seq 4096,16384 \
  --out $R/bench_hopper.json ${BENCH_ARGS:---attn-configs 128x128x2x256 --skip mma_sync,wgmma_cpasync --extra no_overlap} \
  > $R/bench_hopper.log 2>&1
echo "bench rc=$?"; grep "^  " $R/bench_hopper.log | grep -v "TileLang" | cut -c1-100
tar -C /tmp -czf $OUT/attn-causal.tgz attn-causal
