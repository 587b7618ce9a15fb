//! `meshmail-soak bench jmap`: the webmail path, measured from the client.
//!
//! Per run, on a fresh copy of the same prepared data and a fresh node
//! process: (1) bursts of 5 concurrent logins, each a new connection doing
//! what the webmail page does at sign-in — the Session, Mailbox/get, and
//! Email/query + Email/get of the newest 50 inbox messages; (2) the
//! headline: Email/query + Email/get of 50 messages in one request, with
//! Basic auth, on a kept-alive connection, many times; (3) sends through
//! Email/set + EmailSubmission/set to local recipients. Runs are paired
//! A, B, A (same binary, same data; B may use another config) and each
//! reports wall time, the node's CPU seconds and its peak RSS.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::jmap_conn::{Conn, REQUEST_TIMEOUT, check_ok};
use crate::node_proc::{NodeProc, meshmail_binary, setup_account};

#[derive(Debug, Args)]
pub struct JmapArgs {
    /// Messages preloaded into the reader's inbox.
    #[arg(long, default_value_t = 500)]
    pub messages: u64,
    /// Bursts of 5 concurrent logins.
    #[arg(long, default_value_t = 20)]
    pub login_bursts: usize,
    /// Email/query + Email/get requests for the headline figure.
    #[arg(long, default_value_t = 1000)]
    pub reads: usize,
    /// Sends through EmailSubmission/set per run.
    #[arg(long, default_value_t = 2500)]
    pub sends: usize,
    /// Concurrent senders.
    #[arg(long, default_value_t = 4)]
    pub senders: usize,
    /// A TOML config for run B (default: the same as A, a noise check).
    #[arg(long)]
    pub b_config: Option<PathBuf>,
    #[arg(long)]
    pub meshmail: Option<PathBuf>,
    #[arg(long)]
    pub json: Option<PathBuf>,
}

const PASSWORD: &str = "bench";
const USERS: usize = 5;

fn user(i: usize) -> String {
    // One domain per user: `setup_account` adds the domain too.
    format!("jmap{i}@bench{i}.example")
}

#[derive(Debug, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

fn latency(h: &Histogram<u64>) -> Latency {
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Latency {
        count: h.len(),
        p50_ms: ms(0.5),
        p95_ms: ms(0.95),
        p99_ms: ms(0.99),
        max_ms: h.max() as f64 / 1000.0,
    }
}

#[derive(Debug, Serialize)]
pub struct RunFigures {
    pub run: String,
    pub login_inbox: Latency,
    pub query_get_50: Latency,
    pub send: Latency,
    pub sends_per_s: f64,
    pub wall_s: f64,
    pub node_cpu_s: f64,
    pub node_peak_rss_kib: u64,
}

const USING: &str = r#"["urn:ietf:params:jmap:core","urn:ietf:params:jmap:mail","urn:ietf:params:jmap:submission"]"#;

fn inbox_request(account: &str) -> String {
    format!(
        r##"{{"using":{USING},"methodCalls":[["Email/query",{{"accountId":"{account}","filter":{{"inMailbox":"m1"}},"sort":[{{"property":"receivedAt","isAscending":false}}],"limit":50}},"q"],["Email/get",{{"accountId":"{account}","#ids":{{"resultOf":"q","name":"Email/query","path":"/ids"}},"properties":["subject","from","receivedAt","keywords","preview","mailboxIds"]}},"g"]]}}"##
    )
}

/// Sign-in as the webmail does it, on a new connection.
async fn login(addr: &str, i: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let auth = crate::jmap_conn::basic(&user(i), PASSWORD);
    let account = format!("a{}", i + 1);
    let mut c = Conn::open(addr).await?;
    let (s, b) = c.request("GET", "/.well-known/jmap", &auth, "").await?;
    check_ok(s, &b, "session")?;
    let mb = format!(
        r#"{{"using":{USING},"methodCalls":[["Mailbox/get",{{"accountId":"{account}","properties":["name","role","unreadEmails","totalEmails","parentId"]}},"m"]]}}"#
    );
    let (s, b) = c.request("POST", "/jmap/api", &auth, &mb).await?;
    check_ok(s, &b, "Mailbox/get")?;
    let (s, b) = c.request("POST", "/jmap/api", &auth, &inbox_request(&account)).await?;
    check_ok(s, &b, "inbox")?;
    Ok(started.elapsed())
}

fn send_request(to: &str, n: usize) -> String {
    format!(
        r##"{{"using":{USING},"methodCalls":[["Email/set",{{"accountId":"a2","create":{{"d":{{"mailboxIds":{{"m3":true}},"keywords":{{"$seen":true}},"from":[{{"email":"{from}"}}],"to":[{{"email":"{to}"}}],"subject":"bench {n}","textBody":[{{"partId":"t","type":"text/plain"}}],"bodyValues":{{"t":{{"value":"benchmark message {n}"}}}}}}}}}},"c"],["EmailSubmission/set",{{"accountId":"a2","create":{{"s":{{"identityId":"i0","emailId":"#d"}}}}}},"s"]]}}"##,
        from = user(1)
    )
}

fn preload(node: &NodeProc, n: u64) -> anyhow::Result<()> {
    use std::io::{BufRead, BufReader as StdReader, Write};
    let stream = std::net::TcpStream::connect(node.addr("smtp")?)?;
    stream.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    let mut w = stream.try_clone()?;
    let mut r = StdReader::new(stream);
    let mut reply = || -> anyhow::Result<String> {
        loop {
            let mut l = String::new();
            r.read_line(&mut l)?;
            if l.as_bytes().get(3) != Some(&b'-') {
                return Ok(l);
            }
        }
    };
    reply()?;
    write!(w, "EHLO bench\r\n")?;
    reply()?;
    for i in 0..n {
        write!(
            w,
            "MAIL FROM:<load@remote.example>\r\nRCPT TO:<{}>\r\nDATA\r\n",
            user(0)
        )?;
        for _ in 0..3 {
            reply()?;
        }
        write!(
            w,
            "From: Load {i} <load@remote.example>\r\nTo: {}\r\nSubject: preload {i}\r\nMessage-ID: <p{i}@remote.example>\r\n\r\nBody of message {i}, a line of text to preview.\r\n.\r\n",
            user(0)
        )?;
        let r = reply()?;
        if !r.starts_with("250") {
            bail!("preload: {r}");
        }
    }
    Ok(())
}

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    let status = std::process::Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    if !status.success() {
        bail!("cp -a {} {} failed", from.display(), to.display());
    }
    Ok(())
}

fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("histogram bounds")
}

async fn run_once(
    name: &str,
    bin: &Path,
    data: &Path,
    config: Option<&Path>,
    args: &JmapArgs,
) -> anyhow::Result<RunFigures> {
    let mut extra = vec!["--allow-plaintext-auth-on-loopback"];
    let cfg_text;
    if let Some(c) = config {
        cfg_text = c.to_str().context("utf-8 path")?.to_string();
        extra.extend(["--config", &cfg_text]);
    }
    let node = NodeProc::start(bin, data, &extra)?;
    let addr = node.addr("http")?;
    let cpu_before = node.cpu_seconds()?;
    let started = Instant::now();

    let logins = login_bursts(&addr, args.login_bursts).await?;
    let reads = inbox_reads(&addr, args.reads).await?;
    let (sends, send_wall) = concurrent_sends(&addr, args.sends, args.senders).await?;
    Ok(RunFigures {
        run: name.to_string(),
        login_inbox: latency(&logins),
        query_get_50: latency(&reads),
        sends_per_s: sends.len() as f64 / send_wall,
        send: latency(&sends),
        wall_s: started.elapsed().as_secs_f64(),
        node_cpu_s: node.cpu_seconds()? - cpu_before,
        node_peak_rss_kib: node.peak_rss_kib()?,
    })
}

/// `bursts` times, every user logs in and reads its INBOX at once.
async fn login_bursts(addr: &str, bursts: usize) -> anyhow::Result<Histogram<u64>> {
    let mut logins = hist();
    for _ in 0..bursts {
        let burst: Vec<_> = (0..USERS)
            .map(|i| {
                let addr = addr.to_string();
                tokio::spawn(async move { login(&addr, i).await })
            })
            .collect();
        for t in burst {
            logins.record(t.await??.as_micros() as u64)?;
        }
    }
    Ok(logins)
}

/// `n` INBOX query+gets in turn on one connection.
async fn inbox_reads(addr: &str, n: usize) -> anyhow::Result<Histogram<u64>> {
    let mut reads = hist();
    let mut c = Conn::open(addr).await?;
    let (auth, body) = (crate::jmap_conn::basic(&user(0), PASSWORD), inbox_request("a1"));
    for _ in 0..n {
        let t = Instant::now();
        let (s, b) = c.request("POST", "/jmap/api", &auth, &body).await?;
        check_ok(s, &b, "query+get")?;
        reads.record(t.elapsed().as_micros() as u64)?;
    }
    Ok(reads)
}

/// `sends` submissions spread over `senders` connections; returns their
/// latencies and the wall time they took together.
async fn concurrent_sends(addr: &str, sends: usize, senders: usize) -> anyhow::Result<(Histogram<u64>, f64)> {
    let hist_all = Arc::new(std::sync::Mutex::new(hist()));
    let send_started = Instant::now();
    let per_sender = sends.div_ceil(senders.max(1));
    let mut tasks = Vec::new();
    for s in 0..senders.max(1) {
        let (addr, sends) = (addr.to_string(), hist_all.clone());
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::open(&addr).await?;
            let auth = crate::jmap_conn::basic(&user(1), PASSWORD);
            for n in 0..per_sender {
                let to = user(2 + (n + s) % (USERS - 2));
                let t = Instant::now();
                let (st, b) = c.request("POST", "/jmap/api", &auth, &send_request(&to, n)).await?;
                check_ok(st, &b, "send")?;
                if !b.windows(15).any(|w| w == b"\"created\":{\"s\":") {
                    bail!("send not created: {}", String::from_utf8_lossy(&b));
                }
                sends
                    .lock()
                    .expect("histogram")
                    .record(t.elapsed().as_micros() as u64)?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let send_wall = send_started.elapsed().as_secs_f64();
    let sends = hist_all.lock().expect("histogram").clone();
    Ok((sends, send_wall))
}

pub fn run(args: JmapArgs) -> anyhow::Result<()> {
    let bin = meshmail_binary(args.meshmail.as_deref())?;
    let dir = tempfile::tempdir()?;
    let seed = dir.path().join("seed");
    std::fs::create_dir_all(&seed)?;
    for i in 0..USERS {
        setup_account(&bin, &seed, &user(i), PASSWORD)?;
    }
    {
        let node = NodeProc::start(&bin, &seed, &[])?;
        preload(&node, args.messages)?;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut runs = Vec::new();
    for (name, config) in [("A1", None), ("B", args.b_config.as_deref()), ("A2", None)] {
        let data = dir.path().join(name);
        copy_dir(&seed, &data)?;
        runs.push(rt.block_on(run_once(name, &bin, &data, config, &args))?);
    }
    println!(
        "bench jmap: {} inbox messages, {} bursts of {USERS} logins, {} query+get of 50, {} sends by {} senders\n",
        args.messages, args.login_bursts, args.reads, args.sends, args.senders
    );
    println!(
        "| run | login+inbox p50/p95 ms | query+get 50 p50/p99 ms | send p50/p99 ms | sends/s | wall s | node CPU s | node peak RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        println!(
            "| {} | {:.1} / {:.1} | {:.2} / {:.2} | {:.1} / {:.1} | {:.0} | {:.1} | {:.1} | {:.0} |",
            r.run,
            r.login_inbox.p50_ms,
            r.login_inbox.p95_ms,
            r.query_get_50.p50_ms,
            r.query_get_50.p99_ms,
            r.send.p50_ms,
            r.send.p99_ms,
            r.sends_per_s,
            r.wall_s,
            r.node_cpu_s,
            r.node_peak_rss_kib as f64 / 1024.0
        );
    }
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&runs)?)?;
    }
    Ok(())
}
