#!/usr/bin/env bash
# The official TileLang puzzles (github.com/tile-ai/tilelang-puzzles), their answers (ans/*.py)
# unchanged, on tegula's CPU interpreter: `tilelang` is tegula (`python -m tegula run`).
#
#   bash tests/compat/puzzles/run_puzzles.sh PUZZLES_CHECKOUT [NN ...]     (from tegula's root)
#
# A copy of the checkout gets its host device strings rewritten ("cuda" -> "cpu", .cuda() ->
# .cpu()), as ../shared/conformance/run.sh cpu does for TileLang's examples; kernels are not
# touched. torch.cuda's queries come from the conformance cpu_shim; torch's float16 matmul on
# the CPU (the references of 08 and 10) multiplies in float32 (sitecustomize.py here). Prints one
# line per puzzle: status and wall seconds; logs in $PUZZLES_OUT (default ./puzzles-out).
# PER_S (default 900) limits each puzzle; PLAIN_TORCH=1 leaves torch's float16 matmul alone.
set -u
src=${1:?usage: run_puzzles.sh PUZZLES_CHECKOUT [NN ...]}; shift
root=$PWD; here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
shim=${TEGULA_CPU_SHIM:-$(cd "$root/../shared/conformance/cpu_shim" 2>/dev/null && pwd)}
out=${PUZZLES_OUT:-$PWD/puzzles-out}; per=${PER_S:-900}
rm -rf "$out"; mkdir -p "$out"; cp -r "$src" "$out/puzzles"; cd "$out/puzzles" || exit 2
grep -rlE "[\"']cuda(:0)?[\"']|\.cuda\(\)" . --include='*.py' | xargs -r sed -i -E "s/([\"'])cuda(:0)?([\"'])/\1cpu\3/g; s/\.cuda\(\)/.cpu()/g"
if [[ -n ${PLAIN_TORCH:-} ]]; then sc=$shim; else sc=$here; fi
export TEGULA_CPU_SHIM=$shim TEGULA_TARGET=cpu PYTHONUNBUFFERED=1
export PYTHONPATH="$sc:$root:$PWD${PYTHONPATH:+:$PYTHONPATH}"
for f in ans/*.py; do
  n=$(basename "$f" .py)
  if (($#)) && [[ " $* " != *" ${n%%-*} "* ]]; then continue; fi
  start=$(date +%s.%N)
  timeout "$per" python -m tegula run "$f" > "$out/$n.log" 2>&1; rc=$?
  secs=$(echo "$(date +%s.%N) - $start" | bc)
  if ((rc == 0)) && ! grep -q "Results match: False" "$out/$n.log"; then s=PASS; else s="FAIL (rc=$rc)"; fi
  printf '%-24s %-12s %6.0f s  %s\n' "$n" "$s" "$secs" "$(grep -cE 'Results match: True' "$out/$n.log") checks matched"
done | tee "$out/summary.txt"
