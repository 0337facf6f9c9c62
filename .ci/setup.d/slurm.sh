# accel-cluster: a single-node SLURM (Debian's slurm-wlm) for integration-tests/cluster.
# Sourced by .ci/run. Installs slurmctld/slurmd/munge when missing, starts them with a
# private config under .cache/slurm and exports SLURM_CONF; gives up (the real-SLURM
# test then skips) if the node is not idle within a minute.
_accel_slurm() {
    local dir="$PWD/.cache/slurm" host cpus
    if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
        echo "setup.d/slurm.sh: installing slurmctld, slurmd, slurm-client and munge"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurmctld slurmd slurm-client munge >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq --no-install-recommends \
                slurmctld slurmd slurm-client munge >/dev/null 2>&1; } \
            || { echo "setup.d/slurm.sh: warning: cannot install slurm-wlm"; return 0; }
    fi
    host=$(hostname -s 2>/dev/null || cut -d. -f1 /proc/sys/kernel/hostname); cpus=$(nproc)
    mkdir -p "$dir/state" "$dir/spool" /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
    [ -e /var/log/munge/munged.log ] && chown munge:munge /var/log/munge/munged.log
    cat >"$dir/slurm.conf" <<CONF
ClusterName=accel
SlurmctldHost=$host
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
    export SLURM_CONF="$dir/slurm.conf"
    pgrep -x munged >/dev/null || runuser -u munge -- munged || true
    pgrep -x slurmctld >/dev/null || slurmctld || true
    pgrep -x slurmd >/dev/null || slurmd || true
    for _ in $(seq 1 30); do
        if timeout 3 sinfo -h -o %T 2>/dev/null | grep -q idle; then
            echo "setup.d/slurm.sh: single-node SLURM is up ($host, $cpus CPUs)"
            return 0
        fi
        sleep 2
    done
    echo "setup.d/slurm.sh: warning: SLURM did not come up; the real-SLURM test will skip"
    unset SLURM_CONF
}
_accel_slurm
unset -f _accel_slurm
