# accel-deepspeed: JIT-build DeepSpeed's CPU ops (shm_comm, cpu_adam) once, before the tests, so
# that no test spends its timeout compiling them on a clean machine. Named to run after
# deepspeed.sh (g++, TORCH_EXTENSIONS_DIR, DS_ACCELERATOR). Sourced by .ci/run under
# `set -euo pipefail`: every step is guarded, a failure only prints a warning (the tests then
# build the ops themselves). `uv run --locked` syncs the same environment `uv sync --locked` does.
if command -v g++ >/dev/null 2>&1; then
  echo "setup.d/zz-deepspeed-ops.sh: building DeepSpeed's CPU ops in ${TORCH_EXTENSIONS_DIR:-the default folder}"
  if ! DS_ACCELERATOR=cpu timeout 1500 uv run --locked python -c '
import time
from accel_deepspeed.locks import check_extension_locks

check_extension_locks()  # a lock left by a killed build would make the build below wait forever
from deepspeed.accelerator import get_accelerator

for op in ("ShareMemCommBuilder", "CPUAdamBuilder"):
    start = time.time()
    get_accelerator().create_op_builder(op).load(verbose=False)
    print(f"setup.d/zz-deepspeed-ops.sh: {op} ready in {time.time() - start:.0f} s", flush=True)
'; then
    echo "setup.d/zz-deepspeed-ops.sh: warning: could not build DeepSpeed's ops (see above); the DeepSpeed tests will try again"
  fi
fi
