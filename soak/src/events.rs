//! Mesh membership events as every node saw them (its `/mesh/events`
//! NDJSON stream, one stream per node incarnation), and the parity check
//! over them: every down is for an incarnation the observer had seen up,
//! no incarnation goes down twice, a successor never comes up before its
//! predecessor went down, and at the end every live observer sees every
//! live peer up in its current generation.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

/// A line of a node's `/mesh/events`, and of the runner's own notes in the
/// same timeline: the node's type, so the two sides cannot drift apart.
pub use meshmail_mesh::status::MeshEvent;

/// What happened to one observer incarnation's stream.
#[derive(Debug, Clone, Serialize)]
pub struct StreamStatus {
    pub observer: String,
    pub generation: u64,
    pub connected: bool,
    /// The node has no `/mesh/events` (404): an older build.
    pub unavailable: bool,
    pub malformed_lines: u64,
}

#[derive(Debug, Default)]
pub struct EventLog {
    pub events: Mutex<Vec<MeshEvent>>,
    pub streams: Mutex<Vec<StreamStatus>>,
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl EventLog {
    /// Follows one node incarnation's event stream until the task is
    /// aborted (the runner aborts it when it kills the node) or the stream
    /// ends. It retries only until the first connection: reconnecting a
    /// stream that was live could replay events and fake a parity error.
    pub fn follow(self: &Arc<Self>, http: String, observer: String, generation: u64) -> tokio::task::JoinHandle<()> {
        let log = self.clone();
        let slot = {
            let mut s = log.streams.lock().expect("streams");
            s.push(StreamStatus {
                observer: observer.clone(),
                generation,
                connected: false,
                unavailable: false,
                malformed_lines: 0,
            });
            s.len() - 1
        };
        tokio::spawn(async move {
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
            let reader = {
                let log = log.clone();
                tokio::spawn(async move {
                    while let Some(line) = rx.recv().await {
                        log.streams.lock().expect("streams")[slot].connected = true;
                        match serde_json::from_str::<MeshEvent>(&line) {
                            Ok(e) => log.events.lock().expect("events").push(e),
                            Err(_) => log.streams.lock().expect("streams")[slot].malformed_lines += 1,
                        }
                    }
                })
            };
            for _ in 0..120 {
                // A week of silence is "never": a quiet mesh sends nothing.
                match crate::http::stream_lines(&http, "/mesh/events", Duration::from_secs(7 * 86_400), tx.clone())
                    .await
                {
                    Ok(()) => break,
                    Err(crate::http::HttpError::Status { status: 404, .. }) => {
                        log.streams.lock().expect("streams")[slot].unavailable = true;
                        break;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
            drop(tx);
            let _ = reader.await;
        })
    }

    /// Records an action of the runner itself in the same timeline.
    pub fn note(&self, kind: &str, node: &str, generation: u64, reason: &str) {
        self.events.lock().expect("events").push(MeshEvent {
            ts_ms: unix_ms(),
            observer: "runner".into(),
            observer_generation: 0,
            kind: kind.into(),
            node: node.into(),
            generation,
            reason: reason.into(),
            missed: None,
        });
    }

    pub fn snapshot(&self) -> Vec<MeshEvent> {
        let mut v = self.events.lock().expect("events").clone();
        v.sort_by_key(|e| e.ts_ms);
        v
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ObserverParity {
    pub observer: String,
    pub observer_generation: u64,
    pub ups: u64,
    pub downs: u64,
    pub orphaned_downs: u64,
    pub duplicate_downs: u64,
    pub up_before_predecessor_down: u64,
    pub stale_at_end: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ParityFindings {
    pub observers: Vec<ObserverParity>,
    pub ups: u64,
    pub downs: u64,
    pub orphaned_down: u64,
    pub duplicate_down: u64,
    pub up_before_predecessor_down: u64,
    /// Live observer, live peer, and the observer's last word on the peer is
    /// neither "up" nor about the peer's current generation.
    pub stale_at_end: u64,
    pub examples: Vec<String>,
}

/// Checks the events of every observer incarnation. `alive_at_end` maps
/// each node alive at the end to its generation.
pub fn parity(events: &[MeshEvent], alive_at_end: &HashMap<String, u64>) -> ParityFindings {
    let mut f = ParityFindings::default();
    let mut by_obs: BTreeMap<(String, u64), Vec<&MeshEvent>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.observer != "runner") {
        by_obs
            .entry((e.observer.clone(), e.observer_generation))
            .or_default()
            .push(e);
    }
    for ((observer, og), evs) in by_obs {
        let mut r = Replay::new(observer, og);
        for e in evs {
            r.event(e, &mut f.examples);
        }
        if alive_at_end.get(&r.p.observer) == Some(&og) {
            r.end_view(alive_at_end, &mut f.examples);
        }
        f.add(r.p);
    }
    f
}

impl ParityFindings {
    fn add(&mut self, p: ObserverParity) {
        self.ups += p.ups;
        self.downs += p.downs;
        self.orphaned_down += p.orphaned_downs;
        self.duplicate_down += p.duplicate_downs;
        self.up_before_predecessor_down += p.up_before_predecessor_down;
        self.stale_at_end += p.stale_at_end;
        self.observers.push(p);
    }
}

/// Keeps the first 20 examples: enough to see the pattern.
fn example(examples: &mut Vec<String>, s: String) {
    if examples.len() < 20 {
        examples.push(s);
    }
}

/// One observer incarnation's events, replayed in order.
///
/// Per peer: the generations whose link is up now; per incarnation: ever
/// seen up, and whether its last event was a down. A link drop gives one
/// incarnation several down/up cycles: only a down with no up since the
/// previous one is a duplicate.
struct Replay<'a> {
    p: ObserverParity,
    /// `observer@generation`, as examples name it.
    who: String,
    up_now: HashMap<&'a str, Vec<u64>>,
    seen_up: HashMap<(&'a str, u64), bool>,
    is_down: HashMap<(&'a str, u64), bool>,
    /// Per peer, the last up or down: (kind, generation).
    last: HashMap<&'a str, (&'a str, u64)>,
}

impl<'a> Replay<'a> {
    fn new(observer: String, og: u64) -> Self {
        Replay {
            who: format!("{observer}@{og}"),
            p: ObserverParity {
                observer,
                observer_generation: og,
                ..Default::default()
            },
            up_now: HashMap::new(),
            seen_up: HashMap::new(),
            is_down: HashMap::new(),
            last: HashMap::new(),
        }
    }

    fn event(&mut self, e: &'a MeshEvent, examples: &mut Vec<String>) {
        if e.kind == "up" || e.kind == "down" {
            self.last.insert(&e.node, (&e.kind, e.generation));
        }
        match e.kind.as_str() {
            "up" => self.up(e, examples),
            "down" => self.down(e, examples),
            _ => {}
        }
    }

    fn up(&mut self, e: &'a MeshEvent, examples: &mut Vec<String>) {
        let key = (e.node.as_str(), e.generation);
        self.p.ups += 1;
        let live = self.up_now.entry(&e.node).or_default();
        if live.iter().any(|g| *g < e.generation) {
            self.p.up_before_predecessor_down += 1;
            example(
                examples,
                format!(
                    "{}: {} gen {} up before its predecessor went down",
                    self.who, e.node, e.generation
                ),
            );
        }
        if !live.contains(&e.generation) {
            live.push(e.generation);
        }
        self.seen_up.insert(key, true);
        self.is_down.insert(key, false);
    }

    fn down(&mut self, e: &'a MeshEvent, examples: &mut Vec<String>) {
        let key = (e.node.as_str(), e.generation);
        self.p.downs += 1;
        if !self.seen_up.contains_key(&key) {
            self.p.orphaned_downs += 1;
            example(
                examples,
                format!("{}: down for {} gen {} never seen up", self.who, e.node, e.generation),
            );
        } else if self.is_down.get(&key) == Some(&true) {
            self.p.duplicate_downs += 1;
            example(
                examples,
                format!(
                    "{}: second down for {} gen {} with no up between",
                    self.who, e.node, e.generation
                ),
            );
        }
        self.is_down.insert(key, true);
        if let Some(live) = self.up_now.get_mut(e.node.as_str()) {
            live.retain(|g| *g != e.generation);
        }
    }

    /// A live observer at the end: its last word on every other live peer
    /// must be "up" in the peer's current generation.
    fn end_view(&mut self, alive_at_end: &HashMap<String, u64>, examples: &mut Vec<String>) {
        let who = &self.who;
        for (peer, gen_now) in alive_at_end {
            if *peer == self.p.observer {
                continue;
            }
            match self.last.get(peer.as_str()) {
                Some(("up", g)) if g == gen_now => {}
                Some(("down", g)) => {
                    // Left down although the node came back: orphaned.
                    self.p.orphaned_downs += 1;
                    example(
                        examples,
                        format!("{who}: {peer} left down (gen {g}) though gen {gen_now} is alive"),
                    );
                }
                other => {
                    self.p.stale_at_end += 1;
                    example(
                        examples,
                        format!("{who}: last word on {peer} is {other:?}, alive as gen {gen_now}"),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(obs: &str, og: u64, kind: &str, node: &str, g: u64) -> MeshEvent {
        MeshEvent {
            ts_ms: 0,
            observer: obs.into(),
            observer_generation: og,
            kind: kind.into(),
            node: node.into(),
            generation: g,
            reason: String::new(),
            missed: None,
        }
    }

    #[test]
    fn clean_restart_is_balanced() {
        let evs = vec![
            ev("a", 1, "up", "b", 1),
            ev("a", 1, "down", "b", 1),
            ev("a", 1, "up", "b", 2),
        ];
        let alive = HashMap::from([("a".to_string(), 1), ("b".to_string(), 2)]);
        let f = parity(&evs, &alive);
        assert_eq!((f.ups, f.downs, f.orphaned_down, f.stale_at_end), (2, 1, 0, 0));
    }

    #[test]
    fn link_drop_cycles_are_not_duplicates() {
        let evs = vec![
            ev("a", 1, "up", "b", 1),
            ev("a", 1, "down", "b", 1),
            ev("a", 1, "up", "b", 1),
            ev("a", 1, "down", "b", 1),
            ev("a", 1, "down", "b", 1),
            ev("a", 1, "up", "b", 1),
        ];
        let alive = HashMap::from([("a".to_string(), 1), ("b".to_string(), 1)]);
        let f = parity(&evs, &alive);
        assert_eq!((f.duplicate_down, f.orphaned_down, f.stale_at_end), (1, 0, 0));
    }

    #[test]
    fn finds_orphans_and_misorder() {
        let evs = vec![
            ev("a", 1, "down", "c", 7), // never seen up
            ev("a", 1, "up", "b", 1),
            ev("a", 1, "up", "b", 2), // predecessor still up
            ev("a", 1, "down", "b", 2),
        ];
        let alive = HashMap::from([("a".to_string(), 1), ("b".to_string(), 3)]);
        let f = parity(&evs, &alive);
        assert_eq!(f.orphaned_down, 2); // c never up, b left down
        assert_eq!(f.up_before_predecessor_down, 1);
    }
}
