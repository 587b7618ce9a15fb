import collections,re,sys
samples=open('/tmp/ab/e/script.txt').read().split('\n\n')
root=sys.argv[1]
cats=[('fsync','fsync'),('fdatasync','fsync'),('unixSync','fsync'),('walChecksumBytes','wal checksum'),('wal_vfs','wal write (vfs run)'),('pwrite','pwrite'),('walFrames','walFrames other'),('walIndexAppend','wal index'),
('sqlite3WalFindFrame','wal find frame'),('walFindFrame','wal find frame'),('pread','pread'),('balance','btree balance'),('sqlite3BtreeInsert','btree insert'),('sqlite3BtreeIndexMoveto','btree seek'),('sqlite3BtreeDelete','btree delete'),('moveToRoot','btree seek'),('getPageNormal','page get'),('pcache1','pcache'),('sqlite3PagerCommit','pager commit'),('write_ranges_since','conflict check'),('check_member','conflict check'),('prune','prune conflict log'),('heap','heap'),('StatementCache','stmt cache'),('sqlite3_prepare','prepare'),('sqlite3VdbeExec','vdbe other'),('write_member','write_member other'),('BEGIN','begin'),('finish_task_switch','sched')]
tot=0; n=0; c=collections.Counter()
for s in samples:
    lines=[l.strip() for l in s.strip().split('\n') if l.strip()]
    if len(lines)<2: continue
    tot+=1
    frames=[re.sub(r'^[0-9a-f]+ ','',l).rsplit(' (',1)[0] for l in lines[1:]]
    if not any(root in f for f in frames): continue
    n+=1
    for f in frames:
        hit=next((name for k,name in cats if k in f),None)
        if hit: c[hit]+=1; break
    else: c['other:'+frames[0][:50]]+=1
print('total',tot,root,n, '%.1f%%'%(100*n/tot))
for k,v in c.most_common(30): print('%5d %5.1f%% %s'%(v,100*v/n,k))
