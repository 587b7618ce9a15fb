import socket, sys, time
host, port, n, cmd = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
s = socket.create_connection((host, port)); f = s.makefile("rb")
f.readline()
def run(tag, c):
    s.sendall(f"{tag} {c}\r\n".encode()); buf = b""
    while True:
        l = f.readline()
        if l.startswith(tag.encode() + b" "): return l
run("a", "LOGIN u@example.org pw"); run("b", "SELECT INBOX")
ts = []
for i in range(n):
    t = time.perf_counter(); r = run(f"c{i}", cmd); ts.append(time.perf_counter() - t)
ts.sort(); print(cmd, "median ms %.1f" % (ts[len(ts)//2]*1000), r)
