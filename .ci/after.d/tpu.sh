#!/usr/bin/env bash
# accel-tpu's torch_xla tests run in their own environment (torch 2.9 + torch-xla 2.9.0, ~7 GB),
# on PJRT's CPU devices: the uv project packages/accel-tpu/xla-env (see packages/accel-tpu/README.md).
# Its logic tests (config translation, tpu-config, flags) also run in the workspace's environment,
# where the torch_xla ones skip. After changing the dependencies of accel-core, accel-cli or
# accel-tpu, refresh its lock file: uv lock --project packages/accel-tpu/xla-env
set -euo pipefail
cd "$(dirname "$0")/../.."
timeout 900 uv sync --project packages/accel-tpu/xla-env --locked
cd packages/accel-tpu/xla-env
PJRT_DEVICE=CPU timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider
