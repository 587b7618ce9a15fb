#!/usr/bin/env bash
# Idle CPU of one node (`meshmail up --nodes 1`, nothing queued, no client):
# user+system ticks over WINDOW seconds after a WARM-second warm-up, from
# /proc/<pid>/stat, binaries alternating. Usage: idle-cpu.sh OLD NEW [rounds]
set -euo pipefail
old=$1 new=$2 rounds=${3:-3} WARM=10 WINDOW=20
hz=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
  for which in old new; do
    bin=$old; [ "$which" = new ] && bin=$new
    dir=$(mktemp -d); cd "$dir"
    "$bin" up --nodes 1 > up.log 2>&1 &
    up=$!
    until curl -sf 127.0.0.1:8080/status >/dev/null 2>&1; do sleep 0.2; done
    pid=$(pgrep -P "$up" -f " serve " | head -1)
    sleep $WARM
    read -r a b < <(awk '{print $14, $15}' /proc/$pid/stat)
    sleep $WINDOW
    read -r c d < <(awk '{print $14, $15}' /proc/$pid/stat)
    echo "round $r $which: $(( (c-a)+(d-b) )) ticks in ${WINDOW} s = $(python3 -c "print(f'{100*(($c-$a)+($d-$b))/$hz/$WINDOW:.2f}')") % of a core"
    kill "$up"; wait "$up" 2>/dev/null || true
    while pgrep -f "$bin --data-dir" >/dev/null; do sleep 0.2; done
    cd /; rm -rf "$dir"
  done
done
