#!/usr/bin/env python3
"""OBJECTID (RFC 8474) shares JMAP's ids: the MAILBOXID of SELECT and
CREATE is the JMAP Mailbox id, and FETCH EMAILID / THREADID of every
INBOX message are the JMAP Email id and threadId of the same message
(read over HTTP with Basic auth on loopback).

    imap_objectid.py IMAP_ADDR HTTP_ADDR USER PASSWORD
"""
import base64
import imaplib
import json
import re
import sys
import urllib.request

IMAP, HTTP, USER, PASSWORD = sys.argv[1:5]
AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def hp(a):
    h, p = a.rsplit(":", 1)
    return h, int(p)


def http(method, path, body=None):
    req = urllib.request.Request(f"http://{HTTP}{path}", method=method, data=body,
                                 headers={"Authorization": AUTH, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())


def jmap(calls):
    body = json.dumps({"using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
                       "methodCalls": calls}).encode()
    return http("POST", "/jmap/api", body)["methodResponses"]


def main():
    c = imaplib.IMAP4(*hp(IMAP))
    c.login(USER, PASSWORD)
    assert "OBJECTID" in c.capabilities, c.capabilities
    typ, _ = c.select("INBOX")
    assert typ == "OK"
    mailbox_id = c.response("MAILBOXID")[1][0].decode().strip("()")
    typ, data = c.create("ObjectIdBox")
    created = re.search(rb"MAILBOXID \(([A-Za-z0-9_-]+)\)", data[0])
    assert typ == "OK" and created, data
    typ, data = c.fetch("1:*", "(UID EMAILID THREADID)")
    assert typ == "OK", data
    imap_ids = {}
    for item in data:
        m = re.search(rb"EMAILID \(([A-Za-z0-9_-]+)\) THREADID \(([A-Za-z0-9_-]+)\)", item)
        assert m, item
        imap_ids[m.group(1).decode()] = m.group(2).decode()
    assert imap_ids, "INBOX has messages"
    # STATUS and LIST-STATUS give the same MAILBOXID (RFC 8474 §4.2).
    typ, data = c.status("ObjectIdBox", "(MAILBOXID MESSAGES)")
    assert typ == "OK" and f"MAILBOXID ({created.group(1).decode()})".encode() in data[0], data
    typ, data = c._simple_command("LIST", '""', "INBOX", "RETURN", "(STATUS (MAILBOXID))")
    status = c.untagged_responses.pop("STATUS", [])
    assert typ == "OK" and any(f"MAILBOXID ({mailbox_id})".encode() in s for s in status), status
    # SEARCH EMAILID / THREADID (RFC 8474 §6) find the message by the ids.
    email, thread = next(iter(imap_ids.items()))
    typ, by_email = c.uid("SEARCH", "EMAILID", email)
    typ2, by_thread = c.uid("SEARCH", "THREADID", thread)
    assert typ == typ2 == "OK", (by_email, by_thread)
    assert len(by_email[0].split()) == 1, by_email
    same_thread = [e for e, t in imap_ids.items() if t == thread]
    assert len(by_thread[0].split()) == len(same_thread), (by_thread, same_thread)
    typ, none = c.uid("SEARCH", "EMAILID", "e0_0")
    assert typ == "OK" and none[0].split() == [], none
    # DELETED and DELETED-STORAGE (RFC 9208 §4.2.5) count what EXPUNGE frees.
    def deleted():
        typ, data = c.status("INBOX", "(DELETED DELETED-STORAGE)")
        m = re.search(rb"DELETED (\d+) DELETED-STORAGE (\d+)", data[0])
        assert typ == "OK" and m, data
        return int(m.group(1)), int(m.group(2))

    typ, data = c.fetch("1:*", "(FLAGS RFC822.SIZE)")
    seq, size = next((int(i.split()[0]), int(re.search(rb"RFC822.SIZE (\d+)", i).group(1)))
                     for i in data if b"\\Deleted" not in i)
    count, total = deleted()
    c.store(str(seq), "+FLAGS", "\\Deleted")
    assert deleted() == (count + 1, total + size), (deleted(), count, total, size)
    c.store(str(seq), "-FLAGS", "\\Deleted")
    c.logout()

    session = http("GET", "/.well-known/jmap")
    account = session["primaryAccounts"]["urn:ietf:params:jmap:mail"]
    r = jmap([["Mailbox/get", {"accountId": account, "ids": None}, "0"],
              ["Email/query", {"accountId": account, "filter": {"inMailbox": mailbox_id},
                               "limit": 1000}, "1"],
              ["Email/get", {"accountId": account, "#ids": {"resultOf": "1", "name": "Email/query", "path": "/ids"},
                             "properties": ["threadId", "mailboxIds"]}, "2"]])
    boxes = {b["name"]: b["id"] for b in r[0][1]["list"]}
    assert boxes.get("INBOX") == mailbox_id, (boxes, mailbox_id)
    assert boxes.get("ObjectIdBox") == created.group(1).decode(), (boxes, created.group(1))
    jmap_ids = {e["id"]: e["threadId"] for e in r[2][1]["list"]}
    assert jmap_ids == imap_ids, f"IMAP {imap_ids} JMAP {jmap_ids}"
    print(f"objectid: {len(imap_ids)} messages, EMAILID/THREADID/MAILBOXID equal JMAP's")


if __name__ == "__main__":
    main()
