#!/bin/bash
cd /tmp/prof
LOG=/tmp/prof/bench.log
newest_serve() { pgrep -n -f "/tmp/meshmail .*serve"; }
prof() { # name
  local pid=""
  for i in $(seq 1 400); do pid=$(newest_serve); [ -n "$pid" ] && [ "$pid" != "$LAST" ] && break; pid=""; sleep 0.05; done
  LAST=$pid
  sleep 1.5
  cat /proc/$pid/stat | awk '{print "utime",$14,"stime",$15}' > $1.stat0
  perf record -F 499 -g -p $pid -o $1.data -- sleep 3 2> $1.perf.err
  cat /proc/$pid/stat | awk '{print "utime",$14,"stime",$15}' > $1.stat1
  echo "$1 pid $pid" >> /tmp/prof/pids
}
until grep -q "node heap during the fill to 1000000" $LOG; do sleep 0.2; done
LAST=27825
prof emptyb
until grep -q "empty store beside 1000000" $LOG; do sleep 0.1; done
prof big
echo done >> /tmp/prof/pids
