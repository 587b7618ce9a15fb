# usage: srv.sh HTTP IMAP N CMD  -> server-side mean ms of CMD over N runs
m() { curl -s 127.0.0.1:$1/metrics | grep -E "meshmail_imap_command_seconds_(sum|count)\{command=\"$2\"\}" | awk '{print $2}' | paste -sd' '; }
read s0 c0 <<< "$(m $1 "$5")"
python3 raw.py 127.0.0.1 $2 $3 "$4" > /dev/null
read s1 c1 <<< "$(m $1 "$5")"
python3 -c "print('$4', 'server mean ms %.1f' % ((${s1}-${s0:-0})/(${c1}-${c0:-0})*1000))"
