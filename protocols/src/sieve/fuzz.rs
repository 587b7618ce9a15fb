//! Fuzz entry: compile arbitrary bytes as a script and, when they
//! compile, run the script over a fixed message. Must return, never panic.

use std::sync::Arc;

use super::{Context, Env, Envelope, Script, SieveError, compile, run};

struct NoStore(Vec<String>);

impl Env for NoStore {
    fn mailbox_exists(&self, name: &str) -> bool {
        name.eq_ignore_ascii_case("INBOX")
    }
    fn duplicate_seen(&self, _: &str) -> bool {
        false
    }
    fn script(&self, _: bool, _: &str) -> Option<Result<Arc<Script>, SieveError>> {
        None
    }
    fn now_s(&self) -> i64 {
        1_800_000_000
    }
    fn own_addresses(&self) -> &[String] {
        &self.0
    }
}

const MESSAGE: &[u8] = b"From: Ann <ann@x.test>\r\nTo: bob+tag@y.test\r\nSubject: =?UTF-8?Q?hi_there?=\r\n\
Date: Tue, 1 Dec 2026 10:00:00 +0100\r\nMessage-ID: <m@x.test>\r\n\r\nbody text\r\n";

pub fn sieve_script(input: &[u8]) {
    let ctx = Context {
        own_addresses: vec!["bob@y.test".into()],
    };
    match compile(input, &ctx) {
        Ok(script) => {
            let env = NoStore(vec!["bob@y.test".into()]);
            let envelope = Envelope {
                from: "ann@x.test".into(),
                to: "bob+tag@y.test".into(),
            };
            let _ = run(&script, MESSAGE, envelope, &env);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}
