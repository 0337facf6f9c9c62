# accel-deepspeed: DeepSpeed JIT-compiles C++ ops (shm_comm, cpu_adam) with gcc on first use.
# Keep them in one folder of the checkout (.cache is gitignored) so each CI run builds them once,
# and use DeepSpeed's CPU accelerator on this GPU-less machine.
export TORCH_EXTENSIONS_DIR="$PWD/.cache/torch_extensions"
mkdir -p "$TORCH_EXTENSIONS_DIR"
export DS_ACCELERATOR=cpu
if ! command -v g++ >/dev/null 2>&1; then
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++; } \
    || echo "setup.d/deepspeed.sh: warning: no g++; DeepSpeed's C++ ops cannot be built"
fi
