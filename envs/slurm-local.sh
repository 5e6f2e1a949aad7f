#!/usr/bin/env bash
# A single-node SLURM cluster on this machine, from Debian's packages (slurm-wlm, munge), to run
# the workflow's cluster path for real: the controller and the one compute node are this host,
# on the loopback address, with no accounting database (job status comes from squeue).
#
#   bash envs/slurm-local.sh up       # install what is missing, write the config, start munge and SLURM
#   .venv/bin/snakemake --profile config/profiles/slurm-local
#   bash envs/slurm-local.sh down     # cancel jobs, stop the daemons this script started, remove its config
#   bash envs/slurm-local.sh status   # sinfo and squeue
#
# Needs root (it writes /etc/slurm/slurm.conf and starts daemons) and refuses to touch a
# slurm.conf it did not write. `up` also installs the SLURM executor plugin
# (envs/requirements-slurm.txt) into $PYTHON's environment (default .venv/bin/python) when it is
# missing. `down` is safe to run at any time, also after a failed `up`, and twice.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${ROOFLAB_SLURM_STATE:-/var/tmp/rooflab-slurm}   # spool, state, logs and pid files
CONF=/etc/slurm/slurm.conf
MARK="# Written by Roofline Lab's envs/slurm-local.sh; removed by its 'down'."
PYTHON=${PYTHON:-.venv/bin/python}
HOST=$(hostname -s)

say() { echo "slurm-local: $*" >&2; }
die() { say "$*"; exit 1; }

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

logs() {
    for log in "$STATE"/slurmctld.log "$STATE"/slurmd.log; do
        [ -f "$log" ] && { echo "--- $log (last lines)" >&2; tail -n 15 "$log" >&2; }
    done
    return 0
}

install_missing() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurmctld)
    command -v slurmd >/dev/null || missing+=(slurmd)
    command -v sbatch >/dev/null || missing+=(slurm-client)
    command -v munged >/dev/null || missing+=(munge)
    if [ ${#missing[@]} -gt 0 ]; then
        command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
        say "installing ${missing[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
            || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                     --no-install-recommends "${missing[@]}" >/dev/null; } \
            || die "could not install ${missing[*]} with apt-get"
    fi
    if [ -x "$PYTHON" ] && ! "$PYTHON" -c "import snakemake_executor_plugin_slurm" 2>/dev/null; then
        say "installing the SLURM executor plugin into $PYTHON's environment"
        "$PYTHON" -m pip install -q -r envs/requirements-slurm.txt
    fi
}

write_conf() {
    if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
        die "$CONF exists and was not written by this script: this host already has a SLURM configuration; stop here rather than overwrite it"
    fi
    local cpus mem
    cpus=$(nproc)
    mem=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))   # MiB, 90 % of the host
    mkdir -p /etc/slurm "$STATE/ctld" "$STATE/d"
    cat > "$CONF" <<EOF
$MARK
ClusterName=rooflab
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/d
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
# finished jobs stay visible to squeue for 5 minutes (the executor's status source without accounting)
MinJobAge=300
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
    if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
        return 0                                       # a munged already answers (the host's own)
    fi
    [ -s /etc/munge/munge.key ] || { say "creating /etc/munge/munge.key"; mungekey --create >/dev/null 2>&1 \
        || dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
    chown munge:munge /etc/munge/munge.key 2>/dev/null || true
    chmod 600 /etc/munge/munge.key
    install -d -o munge -g munge -m 755 /run/munge
    runuser -u munge -- /usr/sbin/munged || die "munged did not start (see /var/log/munge/munged.log)"
    touch "$STATE/munged.ours"
    for _ in $(seq 50); do
        munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    die "munged started but does not answer"
}

wait_idle() {
    local state=""
    for _ in $(seq 120); do
        state=$(sinfo -h -N -n "$HOST" -o %t 2>/dev/null | head -n 1 || true)
        case "$state" in
            idle|mix|alloc) return 0 ;;
            down*|drain*|drng*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
        esac
        sleep 0.5
    done
    logs
    die "node $HOST is not idle after 60 s (state: ${state:-no answer from slurmctld})"
}

up() {
    [ "$(id -u)" -eq 0 ] || die "run as root: it writes $CONF and starts munged, slurmctld and slurmd"
    install_missing
    mkdir -p "$STATE"
    write_conf
    start_munge
    alive "$STATE/slurmctld.pid" || slurmctld || { logs; die "slurmctld did not start"; }
    alive "$STATE/slurmd.pid" || slurmd || { logs; die "slurmd did not start"; }
    wait_idle
    say "up: partition cpu on $HOST ($(nproc) CPUs); state in $STATE"
}

stop_pid() {    # stop_pid NAME PIDFILE: SIGTERM, then SIGKILL after 10 s
    local pid
    alive "$2" || return 0
    pid=$(cat "$2")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    say "$1 ($pid) still running after 10 s: killing it"
    kill -9 "$pid" 2>/dev/null || true
}

down() {
    if command -v squeue >/dev/null && alive "$STATE/slurmctld.pid"; then
        scancel --full --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    fi
    stop_pid slurmd "$STATE/slurmd.pid"
    stop_pid slurmctld "$STATE/slurmctld.pid"
    if [ -f "$STATE/munged.ours" ]; then
        stop_pid munged /run/munge/munged.pid
        rm -f "$STATE/munged.ours"
    fi
    if [ -f "$CONF" ] && grep -qF "$MARK" "$CONF"; then
        rm -f "$CONF"
    fi
    say "down"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) sinfo; squeue ;;
    *) die "usage: bash envs/slurm-local.sh up|down|status" ;;
esac
