//! Whole-script tests: source in, actions out.

use std::collections::HashMap;
use std::sync::Arc;

use super::*;

#[derive(Default)]
struct TestEnv {
    own: Vec<String>,
    scripts: HashMap<String, String>,
    seen: Vec<String>,
}

impl Env for TestEnv {
    fn mailbox_exists(&self, name: &str) -> bool {
        ["INBOX", "Archive"].contains(&name)
    }
    fn duplicate_seen(&self, id: &str) -> bool {
        self.seen.iter().any(|s| s == id)
    }
    fn script(&self, _: bool, name: &str) -> Option<Result<Arc<Script>, SieveError>> {
        let src = self.scripts.get(name)?;
        Some(compile(src.as_bytes(), &Context::default()).map(Arc::new))
    }
    fn now_s(&self) -> i64 {
        1_796_000_000
    }
    fn own_addresses(&self) -> &[String] {
        &self.own
    }
}

const MSG: &[u8] = b"From: Ann <ann@x.test>\r\nTo: bob@y.test\r\nSubject: Lunch on Friday\r\n\
Date: Tue, 1 Dec 2026 10:00:00 +0100\r\nMessage-ID: <m1@x.test>\r\nX-Spam-Score: 7\r\n\r\nShall we meet at noon?\r\n";

fn actions_with(src: &str, env: &TestEnv) -> Result<Vec<Action>, RuntimeError> {
    let script = compile(
        src.as_bytes(),
        &Context {
            own_addresses: vec!["bob@y.test".into()],
        },
    )
    .expect("compiles");
    let envelope = Envelope {
        from: "ann@x.test".into(),
        to: "bob+lists@y.test".into(),
    };
    run(&script, MSG, envelope, env).map(|o| o.actions)
}

fn actions(src: &str) -> Vec<Action> {
    let env = TestEnv {
        own: vec!["bob@y.test".into()],
        ..Default::default()
    };
    actions_with(src, &env).expect("runs")
}

fn keep() -> Action {
    Action::Keep { flags: vec![] }
}

#[test]
fn implicit_keep_and_its_cancellation() {
    assert_eq!(actions(""), vec![keep()]);
    assert_eq!(actions("discard;"), vec![Action::Discard]);
    let f = |m: &str| Action::FileInto {
        mailbox: m.into(),
        flags: vec![],
        create: false,
    };
    assert_eq!(actions("require \"fileinto\"; fileinto \"A\";"), vec![f("A")]);
    assert_eq!(
        actions("require [\"fileinto\",\"copy\"]; fileinto :copy \"A\";"),
        vec![f("A"), keep()]
    );
    assert_eq!(
        actions("require \"fileinto\"; fileinto \"A\"; fileinto \"A\"; keep;"),
        vec![f("A"), keep()]
    );
    assert_eq!(
        actions("redirect \"c@z.test\"; redirect \"C@z.test\";"),
        vec![Action::Redirect {
            address: "c@z.test".into()
        }]
    );
}

#[test]
fn tests_variables_and_flags() {
    let src = r#"require ["variables", "imap4flags", "fileinto", "relational", "comparator-i;ascii-numeric", "subaddress", "envelope"];
if header :matches "subject" "* on *" { set :upperfirst "day" "${2}"; }
if header :value "ge" :comparator "i;ascii-numeric" "x-spam-score" "5" { addflag "\\Seen"; addflag "$Junk"; }
if envelope :detail "to" "lists" { fileinto "lists-${day}"; }
"#;
    assert_eq!(
        actions(src),
        vec![Action::FileInto {
            mailbox: "lists-Friday".into(),
            flags: vec!["\\Seen".into(), "$Junk".into()],
            create: false
        }]
    );
}

#[test]
fn dates_bodies_and_editheader() {
    let src = r#"require ["date", "body", "editheader", "fileinto"];
if allof (date :zone "+0000" "date" "hour" "09", body :contains "noon") { addheader "X-Seen" "yes"; }
if header :is "x-seen" "yes" { fileinto "Seen"; }"#;
    let f = Action::FileInto {
        mailbox: "Seen".into(),
        flags: vec![],
        create: false,
    };
    assert_eq!(actions(src), vec![f]);
}

#[test]
fn vacation_reject_and_conflicts() {
    let v = actions("require \"vacation\"; vacation :days 3 \"away\";");
    assert!(
        matches!(&v[0], Action::Vacation(r) if r.period_s == 3 * 86_400 && r.to == "ann@x.test"),
        "{v:?}"
    );
    assert_eq!(v[1], keep());
    // Not addressed to the account: no reply.
    let env = TestEnv {
        own: vec!["carol@y.test".into()],
        ..Default::default()
    };
    assert_eq!(
        actions_with("require \"vacation\"; vacation \"away\";", &env).unwrap(),
        vec![keep()]
    );
    assert_eq!(
        actions("require \"reject\"; reject \"no thanks\";"),
        vec![Action::Reject {
            reason: "no thanks".into(),
            extended: false
        }]
    );
    let env = TestEnv::default();
    assert!(matches!(
        actions_with("require [\"reject\",\"fileinto\"]; fileinto \"A\"; reject \"x\";", &env),
        Err(RuntimeError::Conflict(_))
    ));
}

#[test]
fn limits_hold_at_run_time() {
    let env = TestEnv::default();
    let many = "redirect \"a@z.test\"; redirect \"b@z.test\"; redirect \"c@z.test\"; redirect \"d@z.test\"; redirect \"e@z.test\";";
    assert_eq!(actions_with(many, &env), Err(RuntimeError::TooManyRedirects(4)));
    let mut env = TestEnv::default();
    env.scripts
        .insert("loop".into(), "require \"include\"; include \"loop\";".into());
    assert!(matches!(
        actions_with("require \"include\"; include \"loop\";", &env),
        Err(RuntimeError::IncludeTooDeep(_))
    ));
    // Backtracking is charged: a pathological pattern runs out of budget.
    let star = format!("if header :matches \"subject\" \"{}x\" {{ discard; }}", "*a".repeat(30));
    assert!(matches!(
        actions_with(&star, &env),
        Err(RuntimeError::Budget(_)) | Ok(_)
    ));
}

#[test]
fn include_duplicate_and_mailboxexists() {
    let mut env = TestEnv {
        own: vec!["bob@y.test".into()],
        ..Default::default()
    };
    env.scripts.insert(
        "lib".into(),
        "require [\"include\",\"variables\"]; global \"box\"; set \"box\" \"Archive\"; return; discard;".into(),
    );
    let src = r#"require ["include", "variables", "fileinto", "mailbox", "duplicate"];
global "box";
include "lib";
if allof (mailboxexists "${box}", not duplicate) { fileinto "${box}"; }"#;
    let f = Action::FileInto {
        mailbox: "Archive".into(),
        flags: vec![],
        create: false,
    };
    assert_eq!(actions_with(src, &env).unwrap(), vec![f]);
    env.seen.push("\u{0}<m1@x.test>".into());
    assert_eq!(actions_with(src, &env).unwrap(), vec![keep()]);
}

#[test]
fn upload_errors_are_clear() {
    let ctx = Context {
        own_addresses: vec!["bob@y.test".into()],
    };
    let err = |src: &[u8]| compile(src, &ctx).unwrap_err().to_string();
    assert_eq!(err(b"require \"nope\";"), "1:1: unsupported extension \"nope\"");
    assert_eq!(
        err(b"keep;\nfileinto \"x\";"),
        "2:1: \"fileinto\" needs `require \"fileinto\"`"
    );
    assert_eq!(err(b"keep;\n\xff"), "2:1: the script is not valid UTF-8");
    assert_eq!(
        err(&vec![b' '; 1 << 20]),
        "the script is 1048576 bytes, the limit is 65536"
    );
    assert_eq!(
        err(b"redirect \"Bob+x@y.test\";"),
        "1:1: redirect to the account's own address \"Bob+x@y.test\" would loop"
    );
    assert_eq!(
        err(b"if header :frob \"a\" \"b\" {}"),
        "1:11: header: unknown tag :frob"
    );
    let deep = "if true {".repeat(100) + &"}".repeat(100);
    assert!(err(deep.as_bytes()).contains("nest deeper than 32"));
}
