# SASS of the GEMM kernel and an opcode histogram (run on a GPU machine with cuobjdump; writes to $OUT).
export PYTHONPATH=$PWD
python3 - <<'PY'
import sys, os
sys.path.insert(0, "examples")
import gemm as ex, tegula
k = tegula.compile(ex.matmul.get_tir(4096, 4096, 4096, 128, 128, 32, 3, 128), out_idx=[-1], target="cuda")
open(os.environ["OUT"] + "/gemm.cubin", "wb").write(k.artifact.cubin)
open(os.environ["OUT"] + "/gemm.cu", "w").write(k.get_kernel_source())
PY
cuobjdump --dump-sass $OUT/gemm.cubin > $OUT/gemm.sass
grep -oE "^\s+/\*[0-9a-f]+\*/\s+[A-Z0-9_.]+" $OUT/gemm.sass | awk '{print $2}' | sed 's/\..*//' | sort | uniq -c | sort -rn | head -25
