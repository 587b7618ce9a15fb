"""The IMAP session's phases (RFC 9051 §3, §6): which commands each of
not-authenticated, authenticated and selected accepts, and how SELECT,
a failed SELECT, UNSELECT, CLOSE and DELETE of the selected mailbox move
between them. One script of commands runs against meshmail and against
Dovecot (the reference server, started by `dovecot_peer.py`); every
tagged status (OK/NO/BAD) must be the expected one on both.

    imap_phases.py MESHMAIL_ADDR USER PASSWORD WORKDIR
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from dovecot_peer import Dovecot  # noqa: E402
from imap_wire import Conn  # noqa: E402

MESHMAIL, USER, PASSWORD, WORKDIR = sys.argv[1:5]

MESSAGE = b"From: a@example.org\r\nSubject: phases\r\n\r\nbody\r\n"

# (command, literals, expected tagged status)
STEPS = [
    # Not authenticated: only the any-state commands and the ways in
    # (two refusals only: Dovecot's login process hangs up after a third).
    ("NOOP", (), "OK"),
    ("SELECT INBOX", (), "BAD"),
    ("FETCH 1 FLAGS", (), "BAD"),
    (f'LOGIN "{USER}" "{PASSWORD}"', (), "OK"),
    # Authenticated: no second login, no selected-state commands.
    (f'LOGIN "{USER}" "{PASSWORD}"', (), "BAD"),
    ("FETCH 1 FLAGS", (), "BAD"),
    ("UID SEARCH ALL", (), "BAD"),
    ("STORE 1 +FLAGS (\\Seen)", (), "BAD"),
    ("EXPUNGE", (), "BAD"),
    ("CLOSE", (), "BAD"),
    ("UNSELECT", (), "BAD"),
    ("APPEND INBOX {}", (MESSAGE,), "OK"),
    ("STATUS INBOX (MESSAGES)", (), "OK"),
    # Selected, then UNSELECT back to authenticated.
    ("SELECT INBOX", (), "OK"),
    ("FETCH 1 FLAGS", (), "OK"),
    ("UID SEARCH ALL", (), "OK"),
    ("UNSELECT", (), "OK"),
    ("FETCH 1 FLAGS", (), "BAD"),
    # A failed SELECT leaves no mailbox selected (RFC 9051 §6.3.2).
    ("SELECT INBOX", (), "OK"),
    ("SELECT no-such-mailbox", (), "NO"),
    ("FETCH 1 FLAGS", (), "BAD"),
    # CLOSE deselects.
    ("SELECT INBOX", (), "OK"),
    ("CLOSE", (), "OK"),
    ("EXPUNGE", (), "BAD"),
    # EXAMINE selects too (read-only).
    ("EXAMINE INBOX", (), "OK"),
    ("FETCH 1 FLAGS", (), "OK"),
    ("UNSELECT", (), "OK"),
    ("LOGOUT", (), "OK"),
]


def run(addr):
    c = Conn(addr)
    got = []
    for text, literals, _ in STEPS:
        try:
            _, tagged = c.command(text, literals)
        except ConnectionError:
            print(f"{addr}: connection closed at {text!r}")
            raise
        got.append(tagged.split(b" ", 2)[1].decode())
    c.close()
    return got


def main():
    failures = 0
    with Dovecot(os.path.join(WORKDIR, "dovecot"), {USER: PASSWORD}) as dove:
        results = {
            "dovecot": run(f"127.0.0.1:{dove.imap_port}"),
            "meshmail": run(MESHMAIL),
        }
    for i, (text, _, want) in enumerate(STEPS):
        for server, got in results.items():
            if got[i] != want:
                failures += 1
                print(f"WRONG {server}: step {i} {text!r}: {got[i]}, expected {want}")
    print(f"phases: {len(STEPS)} steps on 2 servers, {failures} wrong")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
