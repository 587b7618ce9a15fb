import sys,re
for f in sys.argv[1:]:
    d={}
    for l in open(f):
        if l.startswith('#'): continue
        m=re.match(r'(\S+?)(\{[^}]*\})? (\S+)$',l.strip())
        if m:
            try: d[(m.group(1),m.group(2) or '')]=float(m.group(3))
            except ValueError: pass
    def g(n,lab=''): return d.get((n,lab),0)
    rs=g('meshmail_kv_sqlite_checkpoint_seconds_sum','{where="restart"}'); rc=g('meshmail_kv_sqlite_checkpoint_seconds_count','{where="restart"}')
    bs=g('meshmail_kv_sqlite_checkpoint_seconds_sum','{where="background"}'); bc=g('meshmail_kv_sqlite_checkpoint_seconds_count','{where="background"}')
    print(f.split('/')[-1], 'restarts',int(g('meshmail_kv_sqlite_wal_restarts_total')),'restart ckpts',int(rc),'mean ms %.2f'%(1000*rs/rc if rc else 0),'total s %.3f'%rs,'| bg',int(bc),'total s %.3f'%bs, '| partial',int(g('meshmail_kv_sqlite_checkpoints_partial_total')), 'postponed', int(g('meshmail_kv_sqlite_restarts_postponed_total')), 'incommit', int(g('meshmail_kv_sqlite_checkpoints_total','{where="commit"}')), 'walpages', int(g('meshmail_kv_sqlite_wal_pages')))
