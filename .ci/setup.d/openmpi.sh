# accel-cluster: Debian's Open MPI for the mpirun launcher tests (integration-tests/cluster).
# Sourced by .ci/run before `uv sync`; does nothing when mpirun is already installed.
if ! command -v mpirun >/dev/null 2>&1; then
    echo "setup.d/openmpi.sh: installing openmpi-bin and libopenmpi-dev"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null \
        && apt-get install -y -qq --no-install-recommends openmpi-bin libopenmpi-dev >/dev/null \
        || echo "setup.d/openmpi.sh: warning: could not install Open MPI; the MPI tests will be skipped"
fi
