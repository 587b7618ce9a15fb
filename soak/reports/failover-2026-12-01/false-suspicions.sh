#!/usr/bin/env bash
# False suspicions under CPU load: a 3-node `meshmail up` mesh (release
# build, loopback, no mail load) left idle for IDLE_S seconds while two CPU
# burners at niceness NICE load both cores of the machine. Prints, summed
# over the nodes, the suspicions, deaths and false suspicions/deaths
# counted from /metrics during that window. Every peer stays alive the whole
# time, so every suspicion is a false one.
#
#   soak/reports/failover-2026-12-01/false-suspicions.sh [MESHMAIL_BINARY]
#   (env: IDLE_S=120 NICE=19 OFFSET=21000)
set -euo pipefail
BIN=${1:-target/release/meshmail}
IDLE_S=${IDLE_S:-120}
NICE=${NICE:-19}
OFFSET=${OFFSET:-21000}
DATA=$(mktemp -d /tmp/meshmail-fs.XXXXXX)
PORTS=()
for i in 0 1 2; do PORTS+=($((8080 + OFFSET + 10 * i))); done

timeout $((IDLE_S + 150)) "$BIN" --data-dir "$DATA" up --nodes 3 --base-port-offset "$OFFSET" >"$DATA/up.log" 2>&1 &
UP=$!
BURNERS=()
cleanup() {
  for b in "${BURNERS[@]}"; do kill "$b" 2>/dev/null || true; done
  kill "$UP" 2>/dev/null || true
  wait "$UP" 2>/dev/null || true
  rm -rf "$DATA"
}
trap cleanup EXIT

# Every node answers and all 1024 shards are owned (bounded: 90 s).
owned() { curl -s -m 1 "http://127.0.0.1:$1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["shards_owned"])' 2>/dev/null || echo 0; }
for _ in $(seq 1 900); do
  total=0
  for p in "${PORTS[@]}"; do total=$((total + $(owned "$p"))); done
  [ "$total" -eq 1024 ] && break
  sleep 0.1
done
[ "$total" -eq 1024 ] || { echo "mesh did not converge" >&2; tail -20 "$DATA/up.log" >&2; exit 2; }
sleep 5 # let the start-up rebalancing finish

# Sum of a metric (all label sets matching the prefix) over the nodes.
metric() {
  local sum=0 v
  for p in "${PORTS[@]}"; do
    v=$(curl -s -m 2 "http://127.0.0.1:$p/metrics" | awk -v m="$1" 'index($1, m) == 1 {s += $2} END {print s + 0}')
    sum=$(python3 -c "print($sum + $v)")
  done
  echo "$sum"
}
NAMES=('meshmail_mesh_member_events_total{kind="suspect"}' 'meshmail_mesh_member_events_total{kind="dead"}' meshmail_mesh_false_suspicions_total meshmail_mesh_false_deaths_total meshmail_mesh_stalls_total)
BEFORE=()
for n in "${NAMES[@]}"; do BEFORE+=("$(metric "$n")"); done

for _ in 1 2; do
  timeout "$IDLE_S" nice -n "$NICE" sh -c 'while :; do :; done' &
  BURNERS+=($!)
done
sleep "$IDLE_S"
echo "window ${IDLE_S} s, two CPU burners at nice ${NICE}, binary ${BIN}"
for i in "${!NAMES[@]}"; do
  after=$(metric "${NAMES[$i]}")
  echo "${NAMES[$i]} +$(python3 -c "print(int($after - ${BEFORE[$i]}))")"
done
