//! Node configuration: TOML file, then flags. Dev defaults bind loopback on
//! unprivileged ports; `ops/config/production.toml` shows the standard ones.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;
use meshmail_storage::open::KvConfig;
use serde::Deserialize;

use crate::cli::{GlobalOverrides, ServeArgs};

pub const DATA_DIR_DEFAULT: &str = "./meshmail-data";
pub const HTTP_DEFAULT: &str = "127.0.0.1:8080";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    #[serde(default = "default_node_name")]
    pub node_name: String,
    #[serde(default)]
    pub listen: Listen,
    /// The KV store; default: SQLite at `<data_dir>/meshmail.sqlite`.
    #[serde(default)]
    pub store: Option<KvConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    #[serde(default = "default_http")]
    pub http: SocketAddr,
}

impl Default for Listen {
    fn default() -> Self {
        Listen { http: default_http() }
    }
}

fn default_data_dir() -> PathBuf {
    PathBuf::from(DATA_DIR_DEFAULT)
}
fn default_node_name() -> String {
    "node0".to_string()
}
fn default_http() -> SocketAddr {
    HTTP_DEFAULT.parse().expect("valid default")
}

impl Config {
    pub fn load(path: Option<&Path>, overrides: &GlobalOverrides) -> anyhow::Result<Config> {
        let mut cfg: Config = match path {
            Some(p) => {
                let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
                toml::from_str(&text).with_context(|| format!("parsing {}", p.display()))?
            }
            None => toml::from_str("").expect("empty config is valid"),
        };
        if let Some(d) = &overrides.data_dir {
            cfg.data_dir = d.clone();
        }
        Ok(cfg)
    }

    pub fn with_serve_args(mut self, args: &ServeArgs) -> Config {
        if let Some(n) = &args.node_name {
            self.node_name = n.clone();
        }
        if let Some(a) = args.http {
            self.listen.http = a;
        }
        self
    }

    pub fn kv(&self) -> KvConfig {
        self.store
            .clone()
            .unwrap_or_else(|| KvConfig::sqlite_in(&self.data_dir))
    }
}
