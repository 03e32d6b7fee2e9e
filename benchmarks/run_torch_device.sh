#!/bin/bash
# One call on a GPU for tegula.torch: the gpu tests of tests/torch (CUDA-graph capture and
# replay, streams, no allocation or synchronization with outputs given, reduce-overhead, the
# showcase ops and the transformer block under torch.compile), the launch benchmark beside
# torch.add (bench_launch.py), and examples/torch_ops.py on the GPU. Results under $OUT.
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; lscpu | grep "Model name"; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
if [ -z "${NO_BENCH:-}" ]; then
  timeout ${BENCH_TIMEOUT:-120} python3 benchmarks/bench_launch.py --out "$OUT/bench_launch.json" ${BENCH_ARGS:-} > "$OUT/bench_launch.log" 2>&1
  echo "bench_launch rc=$?"; tail -12 "$OUT/bench_launch.log"
fi
if [ -z "${NO_TESTS:-}" ]; then
  timeout ${TEST_TIMEOUT:-240} python3 -m pytest -q -m gpu -p no:cacheprovider ${TESTS:-tests/torch} > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$?"; grep -E "passed|failed|Error|error" "$OUT/pytest.log" | tail -25
fi
if [ -z "${NO_EXAMPLE:-}" ]; then
  timeout ${EXAMPLE_TIMEOUT:-90} python3 examples/torch_ops.py --target cuda > "$OUT/example.log" 2>&1
  echo "example rc=$?"; tail -5 "$OUT/example.log"
fi
