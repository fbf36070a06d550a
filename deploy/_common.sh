# shellcheck shell=bash
# Helpers shared by deploy/kafka.sh, deploy/clickhouse.sh and deploy/alertmanager.sh; sourced,
# never run on its own.
#
# Rules every service script keeps:
#   * everything binds 127.0.0.1 only;
#   * state lives under $SLEUTH_STATE_DIR (default .sleuth in the repo), one folder per service;
#   * a process is only ever signalled through the PID this script recorded in its pid file,
#     and only while /proc/<pid>/cmdline still carries our marker (so a recycled PID belonging
#     to someone else is never touched);
#   * stdout carries only the result line (address / running / stopped); progress goes to stderr.

DEPLOY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
REPO_ROOT="$(cd "$DEPLOY_DIR/.." && pwd -P)"
# A relative SLEUTH_STATE_DIR is relative to the repository root (sleuth.services does the same),
# whatever the caller's working directory.
STATE_DIR="${SLEUTH_STATE_DIR:-.sleuth}"
[[ $STATE_DIR == /* ]] || STATE_DIR="$REPO_ROOT/$STATE_DIR"
mkdir -p "$STATE_DIR"
STATE_DIR="$(cd "$STATE_DIR" && pwd -P)"
BIND_HOST=127.0.0.1
START_TIMEOUT="${SLEUTH_START_TIMEOUT:-90}"
STOP_TIMEOUT="${SLEUTH_STOP_TIMEOUT:-30}"

log() { printf '%s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# check_port NAME VALUE: a TCP port number, or die naming the variable.
check_port() {
    if ! [[ $2 =~ ^[0-9]+$ ]] || (($2 < 1 || $2 > 65535)); then
        die "$1 must be a TCP port number, got '$2'"
    fi
}

# port_open PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
    (exec 3<>"/dev/tcp/$BIND_HOST/$1") 2>/dev/null
}

# read_pid FILE: print the PID recorded in FILE (fails when missing or garbage).
read_pid() {
    local pid
    [[ -f $1 ]] || return 1
    pid="$(<"$1")"
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    printf '%s' "$pid"
}

# pid_is_ours PID MARKER: PID is alive (not a zombie) and its command line contains MARKER.
pid_is_ours() {
    local cmdline
    kill -0 "$1" 2>/dev/null || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
    [[ -n $cmdline && $cmdline == *"$2"* ]]
}

# pid_alive PID: the process exists and is not a zombie (whatever its command line).
pid_alive() {
    local stat
    kill -0 "$1" 2>/dev/null || return 1
    stat="$(<"/proc/$1/stat")" 2>/dev/null || return 1
    stat="${stat##*) }"
    [[ ${stat%% *} != Z ]]
}

# running_pid PIDFILE MARKER: print the recorded PID when that process is still ours.
running_pid() {
    local pid
    pid="$(read_pid "$1")" || return 1
    pid_is_ours "$pid" "$2" || return 1
    printf '%s' "$pid"
}

# take_lock FILE: serialise concurrent up/down calls for one service (e.g. parallel test runs).
# The lock fd is closed in the started service (see start_detached) so it never outlives us.
take_lock() {
    local LOCK_FD
    command -v flock >/dev/null 2>&1 || return 0
    exec {LOCK_FD}>"$1"
    flock -w "$((START_TIMEOUT * 2))" "$LOCK_FD" || die "timed out waiting for lock $1"
}

# start_detached PIDFILE OUTFILE CMD...: start CMD in its own session with stdin /dev/null and
# stdout+stderr appended to OUTFILE, and record its PID. Every other inherited descriptor (our
# lock, pipes of whoever called us) is closed first: a long-lived service holding a caller's pipe
# would make that caller wait for EOF forever (e.g. subprocess.run(capture_output=True)).
start_detached() {
    local pidfile=$1 outfile=$2
    shift 2
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            if ((fd > 2)); then
                eval "exec $fd>&-"
            fi
        done
        exec setsid "$@"
    ) </dev/null >>"$outfile" 2>&1 &
    printf '%s\n' "$!" >"$pidfile"
}

# mark_logs FILE...: remember how long each log is now, so show_log_tail shows only what the
# process about to start writes (the logs are appended to across restarts).
declare -A LOG_MARKS=()
mark_logs() {
    local f
    for f in "$@"; do
        LOG_MARKS[$f]="$(stat -c %s "$f" 2>/dev/null || echo 0)"
    done
}

# show_log_tail FILE...: the last lines each log got since mark_logs, on stderr.
show_log_tail() {
    local f lines
    for f in "$@"; do
        [[ -s $f ]] || continue
        lines="$(tail -c "+$((${LOG_MARKS[$f]:-0} + 1))" "$f" | tail -n 40)"
        [[ -n ${lines//[[:space:]]/} ]] || continue
        log "----- last lines of $f -----"
        log "$lines"
    done
}

# stop_pid NAME PIDFILE MARKER: SIGTERM the recorded process, SIGKILL after $STOP_TIMEOUT s,
# remove the pid file. Harmless when nothing runs.
stop_pid() {
    local name=$1 pidfile=$2 marker=$3 pid waited=0
    if ! pid="$(read_pid "$pidfile")"; then
        rm -f "$pidfile"
        return 0
    fi
    if ! pid_is_ours "$pid" "$marker"; then
        log "$name: pid $pid from $pidfile is not running (or not ours); removing the stale pid file"
        rm -f "$pidfile"
        return 0
    fi
    log "$name: stopping pid $pid"
    kill -TERM "$pid" 2>/dev/null || true
    while pid_is_ours "$pid" "$marker"; do
        if ((waited >= STOP_TIMEOUT * 5)); then
            log "$name: pid $pid still alive after ${STOP_TIMEOUT}s, sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
            break
        fi
        sleep 0.2
        waited=$((waited + 1))
    done
    rm -f "$pidfile"
}

# wait_ready NAME PIDFILE MARKER PROBE LOG...: poll PROBE (a function name) every 0.5 s until it
# succeeds; fail with the log tail when the process dies or $START_TIMEOUT s pass (the half-started
# process is then stopped, so a failed `up` leaves nothing behind).
wait_ready() {
    local name=$1 pidfile=$2 marker=$3 probe=$4 pid deadline
    shift 4
    pid="$(read_pid "$pidfile")" || die "$name: no pid file after start"
    deadline=$((SECONDS + START_TIMEOUT))
    while ((SECONDS < deadline)); do
        # pid_alive, not pid_is_ours: right after the fork the child may not have exec'd yet.
        if ! pid_alive "$pid"; then
            log "$name: process $pid exited during startup"
            show_log_tail "$@"
            rm -f "$pidfile"
            exit 1
        fi
        if "$probe"; then
            return 0
        fi
        sleep 0.5
    done
    log "$name: not answering after ${START_TIMEOUT}s"
    show_log_tail "$@"
    stop_pid "$name" "$pidfile" "$marker"
    exit 1
}

# stop_service NAME DIR PIDFILE MARKER: a script's `down`: stop what it started, under its lock.
stop_service() {
    take_lock "$2/lock"
    stop_pid "$1" "$3" "$4"
    printf '%s stopped\n' "$1"
}

# service_status NAME PIDFILE MARKER PORT ADDRESS: a script's `status`: one line; 0 when our
# process runs and its PORT accepts connections, 3 otherwise.
service_status() {
    local pid
    if pid="$(running_pid "$2" "$3")" && port_open "$4"; then
        printf '%s running %s (pid %s)\n' "$1" "$5" "$pid"
        return 0
    fi
    printf '%s stopped %s\n' "$1" "$5"
    return 3
}

# resume_running NAME PIDFILE MARKER PROBE LOG...: the start of a script's `up`. When the process
# it started before still runs, wait until it answers and succeed (the caller prints its address);
# otherwise remove a stale pid file and fail, so the caller starts one.
resume_running() {
    local name=$1 pidfile=$2 marker=$3 probe=$4 pid
    shift 4
    if pid="$(running_pid "$pidfile" "$marker")"; then
        if ! "$probe"; then
            log "$name: pid $pid is running but not answering yet; waiting"
            wait_ready "$name" "$pidfile" "$marker" "$probe" "$@"
        fi
        return 0
    fi
    rm -f "$pidfile"
    return 1
}

# run_verb ACTION: call the script's function of that name (up, down, status, fetch), else usage.
run_verb() {
    case "${1:-}" in
    up | down | status | fetch) "$1" ;;
    *)
        log "usage: $0 up|down|status|fetch"
        exit 2
        ;;
    esac
}
