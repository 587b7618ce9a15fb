#!/usr/bin/env bash
# A local S3 emulator (moto) for the blob store tests.
#
#   eval "$(.ci/s3-emulator.sh start)"   # installs moto if needed, starts it,
#                                         # creates the bucket, prints exports
#   cargo test -p meshmail-storage --test blob_s3
#   .ci/s3-emulator.sh stop
#
# Only the `export ...` lines go to stdout (so `eval` works); progress goes to
# stderr. object_store cannot create buckets, hence the boto3 step.
set -euo pipefail

VENV="${MESHMAIL_VENV:-/tmp/meshmail-venv}"
HOST=127.0.0.1
PORT="${MESHMAIL_S3_PORT:-9000}"
BUCKET="${MESHMAIL_TEST_S3_BUCKET:-meshmail-test}"
ENDPOINT="http://${HOST}:${PORT}"
PID_FILE="/tmp/meshmail-s3-emulator-${PORT}.pid"
LOG_FILE="/tmp/meshmail-s3-emulator-${PORT}.log"
# Upper bounds: how long to wait for the server to answer, and to exit.
READY_TIMEOUT_S=60
STOP_TIMEOUT_S=10

log() { echo "s3-emulator: $*" >&2; }

# True when the pid file names a live moto_server (not a recycled pid).
running_pid() {
    [[ -f "$PID_FILE" ]] || return 1
    local pid
    pid="$(cat "$PID_FILE")"
    [[ -n "$pid" && -r "/proc/$pid/cmdline" ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q moto_server || return 1
    echo "$pid"
}

answers() { curl -s -o /dev/null --max-time 1 "$ENDPOINT/"; }

ensure_venv() {
    if [[ -x "$VENV/bin/moto_server" && -x "$VENV/bin/python" ]]; then
        return
    fi
    log "creating venv at $VENV and installing moto[server], boto3"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --disable-pip-version-check 'moto[server]' boto3 >&2
}

create_bucket() {
    "$VENV/bin/python" - "$ENDPOINT" "$BUCKET" <<'EOF' >&2
import sys
import boto3

endpoint, bucket = sys.argv[1], sys.argv[2]
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    aws_access_key_id="testing",
    aws_secret_access_key="testing",
    region_name="us-east-1",
)
try:
    s3.create_bucket(Bucket=bucket)
    print(f"s3-emulator: created bucket {bucket}")
except s3.exceptions.BucketAlreadyOwnedByYou:
    print(f"s3-emulator: bucket {bucket} already exists")
EOF
}

start() {
    if pid="$(running_pid)"; then
        log "already running (pid $pid)"
    else
        if answers; then
            log "something else already answers on $ENDPOINT; refusing to start"
            exit 1
        fi
        ensure_venv
        log "starting moto_server on $ENDPOINT (log: $LOG_FILE)"
        nohup "$VENV/bin/moto_server" -H "$HOST" -p "$PORT" >"$LOG_FILE" 2>&1 &
        pid=$!
        echo "$pid" >"$PID_FILE"
        local deadline=$((SECONDS + READY_TIMEOUT_S))
        until answers; do
            if ! kill -0 "$pid" 2>/dev/null; then
                log "moto_server exited during startup:"
                tail -n 20 "$LOG_FILE" >&2
                rm -f "$PID_FILE"
                exit 1
            fi
            if ((SECONDS >= deadline)); then
                log "moto_server did not answer within ${READY_TIMEOUT_S}s"
                stop
                exit 1
            fi
            sleep 0.2
        done
        log "ready (pid $pid)"
    fi
    create_bucket
    echo "export MESHMAIL_TEST_S3_ENDPOINT=$ENDPOINT"
    echo "export MESHMAIL_TEST_S3_BUCKET=$BUCKET"
}

stop() {
    local pid
    if ! pid="$(running_pid)"; then
        log "not running"
        rm -f "$PID_FILE"
        return 0
    fi
    kill "$pid"
    local deadline=$((SECONDS + STOP_TIMEOUT_S))
    while kill -0 "$pid" 2>/dev/null; do
        if ((SECONDS >= deadline)); then
            log "pid $pid ignored SIGTERM for ${STOP_TIMEOUT_S}s; sending SIGKILL"
            kill -9 "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.2
    done
    rm -f "$PID_FILE"
    log "stopped (pid $pid)"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
