import smtplib, sys, threading
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = ("x" * 70 + "\r\n") * 14
def worker(k):
    s = smtplib.SMTP(host, port)
    for i in range(k, n, 8):
        s.sendmail("a@remote.test", ["u@example.org"], f"Subject: m {i}\r\nMessage-ID: <{i}@t>\r\nFrom: a@remote.test\r\n\r\n{body}\r\n")
    s.quit()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
