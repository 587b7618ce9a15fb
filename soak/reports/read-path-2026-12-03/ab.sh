# ab.sh BIN DATA [IMAP_TOML] -> server-side mean ms and node CPU ms per
# FETCH 1:* (UID FLAGS), and SEARCH LARGER 500, over DATA's INBOX
# (u@example.org / pw). IMAP_TOML: lines for the node's [imap] table, e.g.
# 'hot_cache_mb = 0' (hot-cache-2026-12-03.md). Run from this directory.
BIN=$1; D=$2
printf '[imap]\nallow_plaintext_auth_on_loopback = true\n%s\n' "${3:-}" > $D.toml
$BIN --data-dir $D --config $D.toml serve --smtp 127.0.0.1:0 --imap 127.0.0.1:0 --http 127.0.0.1:0 > $D.log 2>&1 & P=$!
for i in $(seq 100); do grep -q "imap=" $D.log && break; sleep 0.1; done
IMAP=$(grep -o "imap=127.0.0.1:[0-9]*" $D.log | head -1 | cut -d: -f2); HTTP=$(grep -o "http=127.0.0.1:[0-9]*" $D.log | head -1 | cut -d: -f2)
python3 raw.py 127.0.0.1 $IMAP 3 "FETCH 1:* (UID FLAGS)" > /dev/null
cpu() { awk '{print $14+$15}' /proc/$P/stat; }
c0=$(cpu); bash srv.sh $HTTP $IMAP 20 "FETCH 1:* (UID FLAGS)" FETCH; c1=$(cpu)
echo "${3:-default config}: cpu ms per FETCH: $(( (c1-c0)*10/20 ))"
bash srv.sh $HTTP $IMAP 3 "SEARCH LARGER 500" SEARCH >/dev/null; bash srv.sh $HTTP $IMAP 15 "SEARCH LARGER 500" SEARCH
kill $P; wait $P 2>/dev/null
