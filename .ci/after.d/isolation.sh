#!/usr/bin/env bash
# Each plugin installs into a fresh venv with only accel-core and its own third-party
# dependencies, imports, and registers its entry point; no other accel package comes along.
set -euo pipefail
cd "$(dirname "$0")/../.."
uv run python tools/check_isolation.py
