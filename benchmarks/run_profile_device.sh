#!/bin/bash
# One call on an H200: each CASE built by tegula and by TileLang 0.1.15 (benchmarks/profile_pairs.py),
# its CUDA source kept, one launch profiled by Nsight Compute (--set full, clocks left alone).
# Run from the tree's root with the peers archive in ../.peers or .peers. Results under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT/ncu"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
for a in ../.peers .peers; do
  [ -f $a/tilelang-0.1.15-cp312-site.tar.xz ] && { mkdir -p /tmp/site && tar -C /tmp/site -xJf $a/tilelang-0.1.15-cp312-site.tar.xz; break; }
done
pip install -q --no-deps ../.wheels/einops-*.whl .wheels/einops-*.whl > /dev/null 2>&1
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$OUT/gpu.txt" 2>&1
for c in ${CASES:-attn128 attn128c gemm16 mla_decode dequant_gemm gemv}; do
  for fw in tegula tilelang; do
    n=$c-$fw
    PYTHONPATH=/tmp/site:$PWD timeout ${PER_S:-90} $NCU --nvtx --nvtx-include "prof/" --set ${SET:-full} --clock-control none \
      --import-source yes -f -o "$OUT/ncu/$n" python3 benchmarks/profile_pairs.py $c $fw "$OUT/src" > "$OUT/ncu/$n.log" 2>&1
    echo "$n rc=$? $(grep -h '^RESULT' "$OUT/ncu/$n.log")"
    [ -f "$OUT/ncu/$n.ncu-rep" ] && $NCU --import "$OUT/ncu/$n.ncu-rep" --page details > "$OUT/ncu/$n.details.txt" 2>&1
  done
done
ls -la "$OUT/ncu" | head -40
