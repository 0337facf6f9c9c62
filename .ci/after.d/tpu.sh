#!/usr/bin/env bash
# accel-tpu runs in its own environment (torch 2.9 + torch-xla 2.9.0, ~7 GB), on PJRT's CPU
# devices: see packages/accel-tpu/README.md. After changing the dependencies of accel-core or
# accel-cli, refresh its lock file: uv lock --project packages/accel-tpu
set -euo pipefail
cd "$(dirname "$0")/../.."
timeout 900 uv sync --project packages/accel-tpu --locked
cd packages/accel-tpu
PJRT_DEVICE=CPU timeout 900 .venv/bin/python -m pytest -q -p no:cacheprovider
