import imaplib, sys, time, re
host, port, user, pw = sys.argv[1:5]
t = time.time()
c = imaplib.IMAP4(host, int(port)); c.login(user, pw)
n = 0
typ, lines = c.list()
for line in lines:
    name = re.match(rb'\([^)]*\) "[^"]*" (.+)$', line).group(1).decode()
    typ, data = c.select(name, readonly=True)
    if int(data[0]) == 0: continue
    typ, data = c.uid("FETCH", "1:*", "(UID FLAGS INTERNALDATE BODY.PEEK[])")
    n += sum(1 for x in data if isinstance(x, tuple))
c.logout()
dt = time.time() - t
print(f"read {n} messages in {dt:.2f} s: {n/dt:.0f} msg/s")
