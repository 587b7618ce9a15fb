//! Continuous client load for the rolling-upgrade test: an SMTP sender, an
//! IMAP reader-writer and a JMAP reader, each on whichever node is up.
//! Clients never panic on a failed operation: they count it, and excuse
//! it only when the node they talked to was taken down meanwhile (a
//! client of a node being restarted sees its connection go; that is the
//! healing bound, not an error of the upgrade).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The endpoints of a node that is up, by slot; `None` while it is down.
/// Each change bumps the slot's epoch, so a client can tell that the node
/// it used was taken down while it talked to it.
#[derive(Default)]
pub struct Slots {
    inner: Mutex<Vec<(u64, Option<Endpoints>)>>,
}

#[derive(Clone, Debug)]
pub struct Endpoints {
    pub smtp: String,
    pub imap: String,
    pub http: String,
}

impl Slots {
    pub fn new(n: usize) -> Arc<Slots> {
        Arc::new(Slots {
            inner: Mutex::new(vec![(0, None); n]),
        })
    }

    pub fn set(&self, slot: usize, e: Option<Endpoints>) {
        let mut v = self.inner.lock().unwrap();
        v[slot].0 += 1;
        v[slot].1 = e;
    }

    /// The `turn`-th node that is up (round robin), with its slot and epoch.
    fn pick(&self, turn: u64) -> Option<(usize, u64, Endpoints)> {
        let v = self.inner.lock().unwrap();
        let up: Vec<usize> = (0..v.len()).filter(|i| v[*i].1.is_some()).collect();
        let slot = *up.get(turn as usize % up.len().max(1))?;
        Some((slot, v[slot].0, v[slot].1.clone().unwrap()))
    }

    fn epoch(&self, slot: usize) -> u64 {
        self.inner.lock().unwrap()[slot].0
    }
}

/// What one kind of client saw.
#[derive(Default, Debug, Clone)]
pub struct Tally {
    pub ok: u64,
    /// Failures on a node that was taken down meanwhile.
    pub excused: u64,
    /// Failures on a node that stayed up: these count against the upgrade.
    pub errors: u64,
    pub last_errors: Vec<String>,
}

impl Tally {
    fn fail(&mut self, excused: bool, what: String) {
        if excused {
            self.excused += 1;
        } else {
            self.errors += 1;
            if self.last_errors.len() < 10 {
                self.last_errors.push(what);
            }
        }
    }
}

pub struct Load {
    pub stop: Arc<AtomicBool>,
    pub sent: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<(String, Tally)>>,
    /// Message number → how many times the sender had to try it again
    /// after a failure that may have come after the message was kept.
    pub retried: Arc<Mutex<BTreeMap<u64, u32>>>,
}

impl Load {
    /// Starts the three clients for `user`; the sender stops after
    /// `max_messages` or when stopped, everything after `limit`.
    pub fn start(slots: Arc<Slots>, user: &str, password: &str, max_messages: u64, limit: Duration) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let retried = Arc::new(Mutex::new(BTreeMap::new()));
        let deadline = Instant::now() + limit;
        let mut threads = Vec::new();
        {
            let (slots, stop, sent, retried, user) = (
                slots.clone(),
                stop.clone(),
                sent.clone(),
                retried.clone(),
                user.to_string(),
            );
            threads.push(std::thread::spawn(move || {
                let t = sender(&slots, &stop, &sent, &retried, &user, max_messages, deadline);
                ("smtp".to_string(), t)
            }));
        }
        {
            let (slots, stop, user, pw) = (slots.clone(), stop.clone(), user.to_string(), password.to_string());
            threads.push(std::thread::spawn(move || {
                ("imap".to_string(), imap_client(&slots, &stop, &user, &pw, deadline))
            }));
        }
        {
            let (slots, stop, user, pw) = (slots.clone(), stop.clone(), user.to_string(), password.to_string());
            threads.push(std::thread::spawn(move || {
                ("jmap".to_string(), jmap_client(&slots, &stop, &user, &pw, deadline))
            }));
        }
        Load {
            stop,
            sent,
            threads,
            retried,
        }
    }

    /// Stops every client and returns what each saw.
    pub fn finish(self) -> BTreeMap<String, Tally> {
        self.stop.store(true, Ordering::SeqCst);
        self.threads.into_iter().map(|t| t.join().unwrap()).collect()
    }
}

fn sender(
    slots: &Slots,
    stop: &AtomicBool,
    sent: &AtomicU64,
    retried: &Mutex<BTreeMap<u64, u32>>,
    user: &str,
    max: u64,
    deadline: Instant,
) -> Tally {
    let mut t = Tally::default();
    let mut n = 0u64;
    let mut turn = 0u64;
    while n < max && !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        turn += 1;
        let Some((slot, epoch, e)) = slots.pick(turn) else {
            continue;
        };
        let data = format!("Subject: upgrade-{n}\r\nMessage-ID: <upgrade-{n}@test>\r\n\r\nmessage {n}\r\n");
        match smtp_send(&e.smtp, "load@remote.test", user, &data) {
            Ok(250) => {
                t.ok += 1;
                n += 1;
                sent.store(n, Ordering::SeqCst);
            }
            other => {
                // Not acknowledged: try the same message again, elsewhere.
                *retried.lock().unwrap().entry(n).or_default() += 1;
                t.fail(slots.epoch(slot) != epoch, format!("slot {slot} msg {n}: {other:?}"));
            }
        }
    }
    t
}

fn imap_client(slots: &Slots, stop: &AtomicBool, user: &str, password: &str, deadline: Instant) -> Tally {
    let mut t = Tally::default();
    let mut turn = 0u64;
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        turn += 1;
        let Some((slot, epoch, e)) = slots.pick(turn) else {
            continue;
        };
        match imap_round(&e.imap, user, password, turn) {
            Ok(()) => t.ok += 1,
            Err(what) => t.fail(slots.epoch(slot) != epoch, format!("slot {slot}: {what}")),
        }
    }
    t
}

/// LOGIN, SELECT INBOX, a flag change on the newest message (a write
/// through the shard's owner), a FETCH of it, LOGOUT.
fn imap_round(addr: &str, user: &str, password: &str, turn: u64) -> Result<(), String> {
    let s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut w = s;
    let mut line = String::new();
    r.read_line(&mut line).map_err(|e| e.to_string())?;
    let flag = if turn.is_multiple_of(2) { "+FLAGS" } else { "-FLAGS" };
    let mut cmd = |tag: &str, text: &str| -> Result<(), String> {
        w.write_all(format!("{tag} {text}\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        loop {
            line.clear();
            if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err(format!("{text}: connection closed"));
            }
            if line.starts_with(&format!("{tag} ")) {
                return if line.starts_with(&format!("{tag} OK")) {
                    Ok(())
                } else {
                    Err(format!("{text}: {}", line.trim_end()))
                };
            }
        }
    };
    cmd("a", &format!("LOGIN {user} {password}"))?;
    cmd("b", "SELECT INBOX")?;
    cmd("c", &format!("STORE * {flag} (\\Seen $Forwarded)"))?;
    cmd("d", "FETCH * (FLAGS UID)")?;
    cmd("e", "LOGOUT")
}

fn jmap_client(slots: &Slots, stop: &AtomicBool, user: &str, password: &str, deadline: Instant) -> Tally {
    let mut t = Tally::default();
    let mut turn = 0u64;
    let auth = crate::jmap_common::basic(user, password);
    let mut account: Option<String> = None;
    while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
        turn += 1;
        let Some((slot, epoch, e)) = slots.pick(turn) else {
            continue;
        };
        let round = match &account {
            None => jmap_account(&e.http, &auth).map(|id| account = Some(id)),
            Some(id) => jmap_round(&e.http, &auth, id),
        };
        match round {
            Ok(()) => t.ok += 1,
            Err(what) => t.fail(slots.epoch(slot) != epoch, format!("slot {slot}: {what}")),
        }
    }
    t
}

/// The account id of the session's primary mail account.
fn jmap_account(addr: &str, auth: &str) -> Result<String, String> {
    let text = jmap_request(addr, "GET", "/jmap/session", auth, "")?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    v["primaryAccounts"]["urn:ietf:params:jmap:mail"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no primary mail account: {text}"))
}

/// The five newest emails' subjects and keywords.
fn jmap_round(addr: &str, auth: &str, account: &str) -> Result<(), String> {
    let body = serde_json::json!({
        "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
        "methodCalls": [
            ["Email/query", {"accountId": account, "limit": 5,
                "sort": [{"property": "receivedAt", "isAscending": false}]}, "q"],
            ["Email/get", {"accountId": account, "properties": ["subject", "keywords"],
                "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"}}, "g"],
        ],
    });
    let text = jmap_request(addr, "POST", "/jmap/api", auth, &body.to_string())?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    match v["methodResponses"][1][0].as_str() {
        Some("Email/get") => Ok(()),
        _ => Err(text.chars().take(300).collect()),
    }
}

/// One HTTP/1.1 request with Basic credentials; the body of a 200.
fn jmap_request(addr: &str, method: &str, path: &str, auth: &str, body: &str) -> Result<String, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAuthorization: {auth}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    s.write_all(body.as_bytes()).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out).to_string();
    if !text.starts_with("HTTP/1.1 200") {
        return Err(text.lines().next().unwrap_or("no answer").to_string());
    }
    Ok(text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

/// One SMTP transaction; the final reply code, or what went wrong.
fn smtp_send(addr: &str, from: &str, to: &str, data: &str) -> Result<u16, String> {
    let s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut w = s;
    let mut reply = || -> Result<u16, String> {
        let mut line = String::new();
        loop {
            line.clear();
            if r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("connection closed".into());
            }
            if line.as_bytes().get(3) != Some(&b'-') {
                return line.get(..3).and_then(|c| c.parse().ok()).ok_or_else(|| line.clone());
            }
        }
    };
    reply()?;
    for (cmd, want) in [
        ("EHLO test.example\r\n".to_string(), 250),
        (format!("MAIL FROM:<{from}>\r\n"), 250),
        (format!("RCPT TO:<{to}>\r\n"), 250),
        ("DATA\r\n".to_string(), 354),
    ] {
        w.write_all(cmd.as_bytes()).map_err(|e| e.to_string())?;
        let code = reply()?;
        if code != want {
            return Ok(code);
        }
    }
    w.write_all(format!("{data}\r\n.\r\n").as_bytes())
        .map_err(|e| e.to_string())?;
    let code = reply()?;
    let _ = w.write_all(b"QUIT\r\n");
    Ok(code)
}
