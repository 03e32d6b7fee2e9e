#!/bin/bash
# One call on an H200: flash attention fwd d128 4x16x4096 (not causal), TileLang 0.1.15 and tegula
# timed in interleaved rounds with the GPU's clocks beside each timing (benchmarks/attn_modes.py),
# then one launch of each profiled by Nsight Compute (--set full, clocks left alone, source
# counters) with both CUDA sources kept (benchmarks/profile_pairs.py). Everything lands in
# $OUT/modes.tgz. Run from the tree's root with the peers archive in ../.peers.
OUT=${OUT:-out}; W=/tmp/modes; mkdir -p "$W/ncu" "$W/src"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TEGULA_CACHE_DIR=/tmp/tegula-cache
for a in ../.peers .peers; do
  [ -f $a/tilelang-0.1.15-cp312-site.tar.xz ] && { mkdir -p /tmp/site && tar -C /tmp/site -xJf $a/tilelang-0.1.15-cp312-site.tar.xz; break; }
done
pip install -q --no-deps ../.wheels/einops-*.whl > /dev/null 2>&1
nvidia-smi > "$W/nvidia-smi.txt" 2>&1
PYTHONPATH=/tmp/site:$PWD timeout ${MODES_S:-120} python3 benchmarks/attn_modes.py --out "$W/modes.json" \
  ${MODES_ARGS:---rounds 10} > "$W/modes.log" 2>&1
echo "attn_modes rc=$?"; grep -v "^round" "$W/modes.log" | tail -24
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for c in ${CASES:-attn128}; do
  for fw in ${FWS:-tegula tilelang}; do
    n=$c-$fw
    PYTHONPATH=/tmp/site:$PWD timeout ${PER_S:-60} $NCU --nvtx --nvtx-include "prof/" --set full --clock-control none \
      --import-source yes -f -o "$W/ncu/$n" python3 benchmarks/profile_pairs.py $c $fw "$W/src" > "$W/ncu/$n.log" 2>&1
    echo "$n rc=$? $(grep -h '^RESULT' "$W/ncu/$n.log")"
    if [ -f "$W/ncu/$n.ncu-rep" ]; then
      $NCU --import "$W/ncu/$n.ncu-rep" --page details > "$W/ncu/$n.details.txt" 2>&1
      $NCU --import "$W/ncu/$n.ncu-rep" --page source --csv --print-source sass > "$W/ncu/$n.sass.csv" 2>/dev/null
      [ $(stat -c %s "$W/ncu/$n.ncu-rep") -gt 6000000 ] && rm -f "$W/ncu/$n.ncu-rep"
    fi
  done
done
tar -C /tmp -czf "$OUT/modes.tgz" modes
ls -la "$OUT"
