#!/usr/bin/env bash
# A local FoundationDB cluster for the tests, from ../shared/fdb (FoundationDB
# 7.3.79 built for this machine; see its README.md).
#
#   eval "$(.ci/fdb.sh start)"        # unpacks the archive if needed, installs
#                                     # libfdb_c, starts one fdbserver on
#                                     # loopback, `configure new single ssd`,
#                                     # prints the exports the tests read
#   eval "$(.ci/fdb.sh start 3)"      # three processes, `configure new double ssd`
#   .ci/fdb.sh stop                   # stops every process, deletes the files
#
# Only `export ...` lines go to stdout (so `eval` works); progress goes to
# stderr. Without the archive it prints `SKIPPED: ...` with how to get it and
# exits 3, so a developer without it sees why instead of a silent pass.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ARCHIVE="${MESHMAIL_FDB_ARCHIVE:-$HERE/../../shared/fdb/fdb-7.3.79-linux-x86_64.tar.xz}"
# Where the archive is unpacked (kept between runs) and where the cluster lives
# (deleted by `stop`).
INSTALL="${MESHMAIL_FDB_INSTALL:-/tmp/meshmail-fdb-install}"
STATE="${MESHMAIL_FDB_DIR:-/tmp/meshmail-fdb}"
PORT_BASE="${MESHMAIL_FDB_PORT:-4500}"
# Upper bounds: how long `configure` and the first healthy status may take.
CONFIGURE_TIMEOUT_S=60
READY_TIMEOUT_S=120
STOP_TIMEOUT_S=10

log() { echo "fdb: $*" >&2; }

bin_dir() { echo "$INSTALL/fdb-7.3.79/bin"; }

unpack() {
    if [[ -x "$(bin_dir)/fdbserver" ]]; then
        return
    fi
    if [[ ! -f "$ARCHIVE" ]]; then
        echo "SKIPPED: FoundationDB archive not found at $ARCHIVE; get ../shared/fdb/ (or build it:" \
            "chrt --idle 0 nice -n 19 bash ../shared/fdb/build.sh foundationdb-7.3.79-src.tar.xz)," \
            "or set MESHMAIL_FDB_ARCHIVE" >&2
        exit 3
    fi
    log "unpacking $ARCHIVE into $INSTALL"
    mkdir -p "$INSTALL"
    tar -xJf "$ARCHIVE" -C "$INSTALL"
}

# The client library where the foundationdb crate links and loads it: /usr/lib
# as root (as FDB's client package does), else LD_LIBRARY_PATH/RUSTFLAGS.
install_client() {
    local lib="$INSTALL/fdb-7.3.79/lib/libfdb_c.so"
    if [[ "$(id -u)" == 0 ]]; then
        if ! cmp -s "$lib" /usr/lib/libfdb_c.so; then
            install -m 0755 "$lib" /usr/lib/libfdb_c.so
            ldconfig
        fi
    else
        echo "export LD_LIBRARY_PATH=$INSTALL/fdb-7.3.79/lib:${LD_LIBRARY_PATH:-}"
        echo "export FDB_CLIENT_LIB_PATH=$INSTALL/fdb-7.3.79/lib"
    fi
}

cli() { "$(bin_dir)/fdbcli" -C "$STATE/fdb.cluster" "$@"; }

start() {
    local processes="${1:-1}"
    local mode=single
    [[ "$processes" -ge 3 ]] && mode=double
    unpack
    install_client
    if [[ -f "$STATE/fdb.cluster" ]]; then
        log "a cluster is already in $STATE: stopping it first"
        stop
    fi
    mkdir -p "$STATE"
    echo "meshmail:test@127.0.0.1:$PORT_BASE" >"$STATE/fdb.cluster"
    for ((i = 0; i < processes; i++)); do
        local port=$((PORT_BASE + i))
        mkdir -p "$STATE/$port/data" "$STATE/$port/logs"
        setsid "$(bin_dir)/fdbserver" -p "127.0.0.1:$port" -C "$STATE/fdb.cluster" \
            -d "$STATE/$port/data" -L "$STATE/$port/logs" \
            >"$STATE/$port/out.log" 2>&1 </dev/null &
        echo $! >"$STATE/$port/pid"
    done
    log "$processes fdbserver process(es) on 127.0.0.1:$PORT_BASE..; configure new $mode ssd"
    cli --exec "configure new $mode ssd" --timeout "$CONFIGURE_TIMEOUT_S" >&2
    local waited=0
    until cli --exec "status minimal" --timeout 5 2>/dev/null | grep -q "available"; do
        waited=$((waited + 1))
        if [[ $waited -ge $READY_TIMEOUT_S ]]; then
            log "not available after ${READY_TIMEOUT_S}s"
            cli --exec status --timeout 10 >&2 || true
            exit 1
        fi
        sleep 1
    done
    log "available ($STATE/fdb.cluster)"
    echo "export MESHMAIL_FDB_CLUSTER_FILE=$STATE/fdb.cluster"
    echo "export MESHMAIL_FDB_BIN=$(bin_dir)"
}

stop() {
    local pids=()
    for f in "$STATE"/*/pid; do
        [[ -f "$f" ]] || continue
        local pid
        pid="$(cat "$f")"
        if [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q fdbserver; then
            kill "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    for pid in "${pids[@]}"; do
        for ((t = 0; t < STOP_TIMEOUT_S * 10; t++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -rf "$STATE"
    log "stopped ${#pids[@]} process(es), deleted $STATE"
}

case "${1:-}" in
    start) start "${2:-1}" ;;
    stop) stop ;;
    *)
        echo "usage: $0 start [PROCESSES] | stop" >&2
        exit 2
        ;;
esac
