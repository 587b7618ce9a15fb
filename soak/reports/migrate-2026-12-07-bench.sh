#!/usr/bin/env bash
# Bench of `meshmail migrate` (release) from a local Dovecot: 3 runs, each
# into a fresh account, on a fresh SQLite data dir. Usage: bench.sh BIN DOVECOT_PORT USER PASSWORD
set -euo pipefail
BIN=$1; PORT=$2; USER=$3; PW=$4
D=$(mktemp -d)
export MESHMAIL_LOG=warn
$BIN --data-dir $D/data domain add example.org >/dev/null
for i in 1 2 3; do echo pw | $BIN --data-dir $D/data account add bench$i@example.org --password-stdin >/dev/null; done
$BIN --data-dir $D/data serve --smtp 127.0.0.1:0 --submission 127.0.0.1:0 --submissions 127.0.0.1:0 --lmtp 127.0.0.1:0 \
    --http 127.0.0.1:0 --imap 127.0.0.1:0 --imaps 127.0.0.1:0 > $D/node.out 2>&1 &
NODE=$!
for _ in $(seq 1 300); do grep -q ready $D/node.out && break; sleep 0.1; done
HTTP=$(grep -o "http=[0-9.:]*" $D/node.out | cut -d= -f2)
for i in 1 2 3; do
    echo "$PW" | $BIN --data-dir $D/data migrate "imap://$USER@127.0.0.1:$PORT" --account bench$i@example.org \
        --password-stdin --plaintext-on-loopback --node $HTTP | grep '^migrated'
done
kill $NODE; wait $NODE || true
rm -rf $D
