//! A mesh this process did not start (the chaos runner's attach mode): the
//! cluster file lists each node's addresses and the shell commands that
//! kill and restart it (`systemctl kill -s KILL meshmail@node-1`, a `kill`
//! of the pid `meshmail up` wrote). Liveness is judged over HTTP only: a
//! node is up when its `/status` answers, and a restart is done when it
//! answers with a higher generation than the incarnation that was killed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;

/// The cluster file (TOML; documented in chaos/README.md).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// The shared data directory, when the runner can reach it: the load's
    /// accounts are created there and `meshmail verify ledger` runs on it
    /// at the end. Without it the accounts must exist (user1..userN@example.test,
    /// password "pw") and the ledger check is not run.
    pub data_dir: Option<PathBuf>,
    /// Longest wait for a node to answer (after a restart command), seconds.
    #[serde(default = "d_ready")]
    pub ready_timeout_s: f64,
    /// Longest run of one kill or restart command, seconds.
    #[serde(default = "d_command")]
    pub command_timeout_s: f64,
    pub node: Vec<AttachedNode>,
}

fn d_ready() -> f64 {
    60.0
}
fn d_command() -> f64 {
    30.0
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachedNode {
    pub name: String,
    /// The node's HTTP admin address (`/status`, `/metrics`, fault endpoints).
    pub http: String,
    pub smtp: String,
    pub submission: String,
    pub imap: String,
    /// Kills the node hard (`sh -c`); absent: the node is never killed.
    pub kill: Option<String>,
    /// Brings it back (`sh -c`); absent: its own supervisor does (systemd
    /// `Restart=`, `meshmail up`), and the runner only waits for it.
    pub restart: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error("reading {0}: {1}")]
    Read(String, std::io::Error),
    #[error("parsing {0}: {1}")]
    Parse(String, toml::de::Error),
    #[error("invalid cluster file: {0}")]
    Invalid(String),
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("`{cmd}` did not finish within {limit_s} s")]
    CommandTimeout { cmd: String, limit_s: f64 },
    #[error("{node} ({http}) did not answer /status {what} within {limit_s} s")]
    NotReady {
        node: String,
        http: String,
        what: String,
        limit_s: f64,
    },
    #[error("{node} ({http}) still answers as generation {generation} {limit_s} s after its kill command")]
    NotKilled {
        node: String,
        http: String,
        generation: u64,
        limit_s: f64,
    },
}

impl ClusterFile {
    pub fn load(path: &Path) -> Result<ClusterFile, AttachError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| AttachError::Read(name.clone(), e))?;
        let c: ClusterFile = toml::from_str(&text).map_err(|e| AttachError::Parse(name, e))?;
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<(), AttachError> {
        let bad = |m: String| Err(AttachError::Invalid(m));
        if self.node.is_empty() || self.node.len() > 16 {
            return bad("needs 1..=16 [[node]] entries".into());
        }
        for (k, v) in [
            ("ready_timeout_s", self.ready_timeout_s),
            ("command_timeout_s", self.command_timeout_s),
        ] {
            if !(v > 0.0 && v <= 3600.0) {
                return bad(format!("{k} must be in (0, 3600]"));
            }
        }
        for (i, n) in self.node.iter().enumerate() {
            if self.node[..i].iter().any(|m| m.name == n.name) {
                return bad(format!("node {} is listed twice", n.name));
            }
            for (k, a) in [
                ("http", &n.http),
                ("smtp", &n.smtp),
                ("submission", &n.submission),
                ("imap", &n.imap),
            ] {
                if a.parse::<std::net::SocketAddr>().is_err() {
                    return bad(format!("node {}: {k} = {a:?} is not IP:PORT", n.name));
                }
            }
        }
        Ok(())
    }
}

/// Runs `cmd` with `sh -c`, at most `limit`.
pub async fn run_shell(cmd: &str, limit: Duration) -> Result<(), AttachError> {
    let child = tokio::process::Command::new("sh")
        .args(["-c", cmd])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| AttachError::Command {
            cmd: cmd.into(),
            status: "not started".into(),
            stderr: e.to_string(),
        })?;
    let out = tokio::time::timeout(limit, child.wait_with_output())
        .await
        .map_err(|_| AttachError::CommandTimeout {
            cmd: cmd.into(),
            limit_s: limit.as_secs_f64(),
        })?
        .map_err(|e| AttachError::Command {
            cmd: cmd.into(),
            status: "wait".into(),
            stderr: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(AttachError::Command {
            cmd: cmd.into(),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

/// The generation a node's `/status` answers with (None: no answer).
pub async fn generation(http: &str) -> Option<u64> {
    let body = crate::http::get(http, "/status", Duration::from_millis(700))
        .await
        .ok()?;
    let st: meshmail_mesh::status::NodeStatus = serde_json::from_str(&body).ok()?;
    Some(st.generation)
}

/// Waits until `/status` answers with a generation above `above` (any, if None).
pub async fn wait_up(node: &str, http: &str, above: Option<u64>, limit: Duration) -> Result<u64, AttachError> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(g) = generation(http).await
            && above.is_none_or(|a| g > a)
        {
            return Ok(g);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(AttachError::NotReady {
        node: node.into(),
        http: http.into(),
        what: above.map_or("at all".into(), |a| format!("with a generation above {a}")),
        limit_s: limit.as_secs_f64(),
    })
}

/// Waits until generation `killed` no longer answers (silence or a successor).
pub async fn wait_gone(node: &str, http: &str, killed: u64, limit: Duration) -> Result<(), AttachError> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if generation(http).await != Some(killed) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(AttachError::NotKilled {
        node: node.into(),
        http: http.into(),
        generation: killed,
        limit_s: limit.as_secs_f64(),
    })
}

/// Why a node's fault endpoints cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FaultEndpointError {
    #[error("404: no fault endpoints (a build without --features meshmail-node/fault-hooks)")]
    NotBuilt,
    #[error("403: fault endpoints off (the node runs without MESHMAIL_FAULT_HOOKS=1)")]
    Off,
    #[error(transparent)]
    Http(crate::http::HttpError),
}

/// Whether the node has fault endpoints turned on: `POST
/// /admin/faults/clock-jump?offset_s=0` (which changes nothing) answers 200.
pub async fn fault_endpoint(http: &str) -> Result<(), FaultEndpointError> {
    match crate::http::post(http, "/admin/faults/clock-jump?offset_s=0", Duration::from_secs(3)).await {
        Ok(_) => Ok(()),
        Err(crate::http::HttpError::Status { status: 404, .. }) => Err(FaultEndpointError::NotBuilt),
        Err(crate::http::HttpError::Status { status: 403, .. }) => Err(FaultEndpointError::Off),
        Err(e) => Err(FaultEndpointError::Http(e)),
    }
}
