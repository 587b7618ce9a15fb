# ab.sh BIN DATA -> server-side mean ms and node CPU ms per FETCH 1:* (UID FLAGS)
BIN=$1; D=$2
$BIN --data-dir $D serve --smtp 127.0.0.1:0 --imap 127.0.0.1:0 --http 127.0.0.1:0 --allow-plaintext-auth-on-loopback > $D.log 2>&1 & P=$!
for i in $(seq 100); do grep -q "imap=" $D.log && break; sleep 0.1; done
IMAP=$(grep -o "imap=127.0.0.1:[0-9]*" $D.log | head -1 | cut -d: -f2); HTTP=$(grep -o "http=127.0.0.1:[0-9]*" $D.log | head -1 | cut -d: -f2)
python3 raw.py 127.0.0.1 $IMAP 3 "FETCH 1:* (UID FLAGS)" > /dev/null
cpu() { awk '{print $14+$15}' /proc/$P/stat; }
c0=$(cpu); bash srv.sh $HTTP $IMAP 20 "FETCH 1:* (UID FLAGS)" FETCH; c1=$(cpu)
echo "cpu ms per FETCH: $(( (c1-c0)*10/20 ))"
bash srv.sh $HTTP $IMAP 3 "SEARCH LARGER 500" SEARCH >/dev/null; bash srv.sh $HTTP $IMAP 15 "SEARCH LARGER 500" SEARCH
kill $P; wait $P 2>/dev/null
