#!/bin/bash
# One call on an H200 for flash attention on sm_90a: the gpu tests of the attention path, then
# bench_hopper.py's attention section (tegula with and without the softmax overlap, TileLang 0.1.15,
# cuDNN / flash SDPA), then Nsight Compute sections of one launch of tegula's d128 kernels.
# Run from the tree's root with the peers archive in ../.peers. Results under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT/ncu"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
timeout ${TEST_TIMEOUT:-90} python3 -m pytest -q -m gpu -p no:cacheprovider ${TESTS:-tests/backends/cuda/test_softmax_overlap.py tests/backends/cuda/test_wgmma.py::test_wgmma_flash_attention_on_gpu} > "$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -6 "$OUT/pytest.log"
[ -f ../.peers/tilelang-0.1.15-cp312-site.tar.xz ] && mkdir -p /tmp/site && tar -C /tmp/site -xJf ../.peers/tilelang-0.1.15-cp312-site.tar.xz
PYTHONPATH=/tmp/site:$PWD timeout ${BENCH_TIMEOUT:-150} python3 benchmarks/bench_hopper.py --only attention \
  --out "$OUT/bench_hopper.json" ${BENCH_ARGS:-} > "$OUT/bench_hopper.log" 2>&1
echo "bench_hopper rc=$?"; grep -v "^  " "$OUT/bench_hopper.log" | grep -v "^{" | tail -14; grep "^  " "$OUT/bench_hopper.log" | tail -60
# cold compile (no disk cache) of the d128 kernel, the process warm
python3 - > "$OUT/compile.txt" 2>&1 <<'PY'
import sys, time
sys.path.insert(0, "examples")
import tegula, flash_attention as ex
from tegula import config
tegula.compile(ex.flash_attention(1, 2, 256, 64, False, 1, 128, 128, 2, 256), out_idx=[-1], target="cuda")
for causal in (False, True):
    with config.override(disable_cache=True):
        t0 = time.perf_counter()
        tegula.compile(ex.flash_attention(4, 16, 4096, 128, causal, 1, 128, 128, 2, 256), out_idx=[-1], target="cuda")
        print(f"cold compile d128 causal={causal}: {time.perf_counter() - t0:.2f} s")
PY
cat "$OUT/compile.txt"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in ${NCU_CASES:-}; do
  PYTHONPATH=/tmp/site:$PWD timeout ${PER_S:-60} $NCU --nvtx --nvtx-include "prof/" ${NCU_SECTIONS:---set full} --clock-control none \
    -f -o "$OUT/ncu/$c-tegula" python3 benchmarks/profile_pairs.py $c tegula "$OUT/src" > "$OUT/ncu/$c-tegula.log" 2>&1
  echo "$c rc=$? $(grep -h '^RESULT' "$OUT/ncu/$c-tegula.log")"
  [ -f "$OUT/ncu/$c-tegula.ncu-rep" ] && $NCU --import "$OUT/ncu/$c-tegula.ncu-rep" --page details > "$OUT/ncu/$c-tegula.details.txt" 2>&1 \
    && rm -f "$OUT/ncu/$c-tegula.ncu-rep"
done
exit 0
