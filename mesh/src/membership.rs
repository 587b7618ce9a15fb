//! Membership and failure detection of one node, as a pure state machine.
//!
//! Inputs are what the transport reports about links ([`Membership::link_up`],
//! [`Membership::link_down`]) and the passing of time ([`Membership::tick`]);
//! outputs are [`MemberEvent`]s and the [`LiveSet`] the lease manager acts
//! on. Time is passed in, never read: a simulator drives it step by step.
//!
//! The rules, per peer incarnation (name, generation):
//! - the clock that matters is *silence*: the time since the peer was last
//!   heard ([`Membership::heard`]: the caller reports traffic on the link,
//!   which QUIC keep-alive pings guarantee every `keep_alive`), or since its
//!   link came up if it was never heard. A link that goes down stops the
//!   hearing, so a peer whose link died by idle timeout is already silent
//!   for that long;
//! - silent for `suspect_after` it is reported [`MemberEvent::Suspect`],
//!   for `dead_after` [`MemberEvent::Dead`], whether or not its link is
//!   still up (a SIGKILLed peer's link stays up until QUIC's idle timeout;
//!   waiting for that made failover slow). Only `Dead` licenses taking its
//!   shards over: a suspect stays in the live set, so a blip never moves a
//!   shard;
//! - hearing it again, or its link coming back, before `dead_after`
//!   cancels the suspicion (counted in [`Membership::false_suspicions`]);
//! - a peer that was never heard (a caller that reports no heartbeats, as
//!   unit tests) is judged by its link alone, from the moment it went down;
//! - a stall of this process (a round much later than expected) is not the
//!   peers' silence: [`Membership::forgive`] restarts their clocks;
//! - a higher generation of the same name makes the older one dead at once
//!   (it restarted: the old process is gone) and the newer alive, in that
//!   order, like [`crate::events`];
//! - a lower generation after a higher one is ignored.
//!
//! A dead incarnation whose link comes back with the same generation (a
//! partition healed after `dead_after`) is alive again. That is safe because
//! membership never grants anything: its shards were taken over with a
//! higher lease epoch, so its old leases are fenced in the store, and being
//! alive only lets it ask for shards again through the lease manager.
//!
//! The view is per node and may disagree with other nodes' (each side of a
//! partition declares the other dead). The store's leases, not membership,
//! keep one writer per shard.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::backoff::{Backoff, BackoffConfig, RandomSource};
use crate::identity::NodeId;
use crate::leases::{Incarnation, LiveSet};

/// Upper bound of `dead_after`: a crashed node's shards must not stay
/// unserved for longer than this, whatever the configuration says.
pub const MAX_DEAD_AFTER: Duration = Duration::from_secs(600);

/// The shortest start grace of [`Membership::settled`]: a second-long
/// `dead_after` is right for a peer that stopped answering, but too short
/// for a just-started node to learn every member from announcements and
/// link to it.
pub const SETTLE_MIN: Duration = Duration::from_secs(3);

/// What membership reports about a peer incarnation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemberEvent {
    Alive(NodeId, u64),
    Suspect(NodeId, u64),
    Dead(NodeId, u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MembershipConfig {
    /// How long a peer must stay silent (nothing heard, or its link down)
    /// before it is reported suspect.
    pub suspect_after: Duration,
    /// How long a peer must stay silent before it is declared dead.
    pub dead_after: Duration,
    /// Redial schedule of a peer whose link is not up.
    pub backoff: BackoffConfig,
}

impl MembershipConfig {
    /// Clamps to `suspect_after <= dead_after <= MAX_DEAD_AFTER`.
    pub fn new(suspect_after: Duration, dead_after: Duration, backoff: BackoffConfig) -> Self {
        let dead_after = dead_after.min(MAX_DEAD_AFTER);
        MembershipConfig {
            suspect_after: suspect_after.min(dead_after),
            dead_after,
            backoff,
        }
    }
}

impl Default for MembershipConfig {
    /// Silence is counted from the last packet heard (QUIC keep-alive every
    /// 200 ms by the node's default), so 500 ms is two and a half missed
    /// heartbeats and 1 s five: a SIGKILLed peer is dead about 1 s after it
    /// died, well inside the 2 s failover target, while a scheduling hiccup
    /// of a few hundred milliseconds only raises a suspicion (which moves
    /// nothing). A restarted peer needs no waiting at all: its higher
    /// generation makes the old one dead at once.
    fn default() -> Self {
        MembershipConfig::new(
            Duration::from_millis(500),
            Duration::from_millis(1000),
            BackoffConfig::new(Duration::from_millis(200), Duration::from_secs(2)),
        )
    }
}

/// A peer incarnation's state as this node sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Up,
    /// Link down for less than `suspect_after`: not reported yet.
    Down,
    Suspect,
    Dead,
}

#[derive(Debug, Clone)]
struct Peer {
    generation: u64,
    status: Status,
    /// Whether its link is up right now (independent of `status`: a silent
    /// peer can be suspect, even dead, while QUIC still holds its link).
    link: bool,
    /// When its silence began: the last time it was heard, or the link's
    /// going down for a peer never heard.
    silent_since: Instant,
    /// Whether the caller reports heartbeats for it at all.
    heard: bool,
}

#[derive(Debug, Clone)]
struct Dial {
    backoff: Backoff,
    /// `None`: dial at the next plan.
    next_at: Option<Instant>,
}

/// The membership view of one node incarnation.
#[derive(Debug)]
pub struct Membership {
    me: Incarnation,
    config: MembershipConfig,
    peers: BTreeMap<NodeId, Peer>,
    dials: BTreeMap<NodeId, Dial>,
    started: Instant,
    /// Suspicions (and deaths) of an incarnation later heard again: the
    /// detector's false positives.
    false_suspicions: u64,
    false_deaths: u64,
}

impl Membership {
    /// `now` is when this incarnation started: see [`Membership::settled`].
    pub fn new(me: Incarnation, config: MembershipConfig, now: Instant) -> Self {
        Membership {
            me,
            config,
            peers: BTreeMap::new(),
            dials: BTreeMap::new(),
            started: now,
            false_suspicions: 0,
            false_deaths: 0,
        }
    }

    /// Suspicions cancelled by the same incarnation being heard again.
    pub fn false_suspicions(&self) -> u64 {
        self.false_suspicions
    }

    /// Deaths cancelled by the same incarnation being heard again (a
    /// healed partition, a paused process resumed, or a detector too eager).
    pub fn false_deaths(&self) -> u64 {
        self.false_deaths
    }

    /// Whether this view can be trusted to name every live peer:
    /// `dead_after`, and at least [`SETTLE_MIN`], has passed since start.
    /// Before that, an incarnation missing from [`Membership::live_set`] may
    /// just not have linked yet, so a node must not take over leases it
    /// finds held by strangers (its own older generations excepted: those
    /// are certainly gone). Assumes a live peer links within that time,
    /// i.e. `backoff.min` well below it.
    pub fn settled(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.started) >= self.config.dead_after.max(SETTLE_MIN)
    }

    pub fn me(&self) -> &Incarnation {
        &self.me
    }

    pub fn config(&self) -> MembershipConfig {
        self.config
    }

    /// The current generation of `id` and its status, if ever seen.
    pub fn status(&self, id: &NodeId) -> Option<(u64, Status)> {
        self.peers.get(id).map(|p| (p.generation, p.status))
    }

    /// Whether the link to `id` is up right now (whatever its status).
    pub fn linked(&self, id: &NodeId) -> bool {
        self.peers.get(id).is_some_and(|p| p.link)
    }

    /// How long `id` has been silent (see the module doc), if ever seen.
    pub fn silence(&self, id: &NodeId, now: Instant) -> Option<Duration> {
        self.peers
            .get(id)
            .map(|p| now.saturating_duration_since(p.silent_since))
    }

    /// A link to `id` at `generation` is up.
    pub fn link_up(&mut self, id: &NodeId, generation: u64, now: Instant) -> Vec<MemberEvent> {
        let mut events = Vec::new();
        if self.is_me(id) {
            return events;
        }
        match self.peers.get_mut(id) {
            None => {
                self.peers.insert(id.clone(), Peer::up(generation, now));
                events.push(MemberEvent::Alive(id.clone(), generation));
            }
            Some(p) if generation < p.generation => return self.advance(now, events),
            Some(p) if generation > p.generation => {
                // Dead strictly before the successor's Alive, so an observer
                // never sees two incarnations of one name alive at once.
                if p.status != Status::Dead {
                    events.push(MemberEvent::Dead(id.clone(), p.generation));
                }
                *p = Peer::up(generation, now);
                events.push(MemberEvent::Alive(id.clone(), generation));
            }
            Some(p) => {
                // Same generation. A down-but-unreported link coming back is
                // invisible to observers: they never heard it went down.
                p.link = true;
                p.silent_since = now;
                Self::revive(p, id, &mut events, &mut self.false_suspicions, &mut self.false_deaths);
            }
        }
        if let Some(d) = self.dials.get_mut(id) {
            d.backoff.reset();
            d.next_at = None;
        }
        // A link came up: the network works again (a healed partition), so
        // peers still down are redialed soon, not at the end of a backoff
        // grown during the outage.
        self.heal(now);
        self.advance(now, events)
    }

    /// Traffic was heard from `id` at `generation` (the caller saw packets
    /// arrive on its link). Stale generations are ignored.
    pub fn heard(&mut self, id: &NodeId, generation: u64, now: Instant) -> Vec<MemberEvent> {
        let mut events = Vec::new();
        if let Some(p) = self.peers.get_mut(id)
            && p.generation == generation
            && p.link
        {
            p.heard = true;
            p.silent_since = now;
            Self::revive(p, id, &mut events, &mut self.false_suspicions, &mut self.false_deaths);
        }
        self.advance(now, events)
    }

    /// This process itself did not run for a while (the caller's round
    /// came much later than due): whatever was not heard meanwhile says
    /// nothing about the peers, so the silence of every linked peer starts
    /// over now. Peers whose link is down keep their clocks.
    pub fn forgive(&mut self, now: Instant) {
        for p in self.peers.values_mut().filter(|p| p.link) {
            p.silent_since = p.silent_since.max(now);
        }
    }

    /// The network is probably whole again (a link came up, a partition
    /// ended): every peer not up is due for a dial within `backoff.min`,
    /// with its backoff started over.
    pub fn heal(&mut self, now: Instant) {
        let soon = now + self.config.backoff.min;
        for (id, d) in &mut self.dials {
            if self.peers.get(id).is_some_and(|p| p.link) {
                continue;
            }
            d.backoff.reset();
            d.next_at = Some(d.next_at.map_or(soon, |at| at.min(soon)));
        }
    }

    /// A suspect or dead incarnation was heard: alive again.
    fn revive(p: &mut Peer, id: &NodeId, events: &mut Vec<MemberEvent>, suspicions: &mut u64, deaths: &mut u64) {
        match p.status {
            Status::Suspect => *suspicions += 1,
            Status::Dead => {
                *suspicions += 1;
                *deaths += 1;
            }
            Status::Up | Status::Down => {}
        }
        if matches!(p.status, Status::Suspect | Status::Dead) {
            events.push(MemberEvent::Alive(id.clone(), p.generation));
        }
        p.status = Status::Up;
    }

    /// The link to `id` at `generation` went down. A report for any other
    /// generation is stale (the link of a superseded incarnation closing)
    /// and ignored.
    pub fn link_down(&mut self, id: &NodeId, generation: u64, now: Instant) -> Vec<MemberEvent> {
        if let Some(p) = self.peers.get_mut(id)
            && p.generation == generation
            && p.link
        {
            p.link = false;
            if !p.heard {
                p.silent_since = now;
            }
            if p.status == Status::Up {
                p.status = Status::Down;
            }
        }
        self.advance(now, Vec::new())
    }

    /// Time passed: reports the suspicions and deaths now due.
    pub fn tick(&mut self, now: Instant) -> Vec<MemberEvent> {
        self.advance(now, Vec::new())
    }

    /// Every incarnation not declared dead, this node included. Suspects are
    /// live: only a death licenses a takeover.
    pub fn live_set(&self) -> LiveSet {
        let peers = self
            .peers
            .iter()
            .filter(|(_, p)| p.status != Status::Dead)
            .map(|(id, p)| Incarnation::new(id.to_string(), p.generation));
        LiveSet::new(peers.chain([self.me.clone()]))
    }

    /// The seeds to dial now: every one whose link is not up and whose
    /// backoff has expired. Each one returned is scheduled for its next
    /// attempt as if this one failed; [`Membership::link_up`] resets it. A
    /// dial still in flight when its next attempt comes due is the caller's
    /// to skip.
    pub fn dial_plan(&mut self, seeds: &[NodeId], now: Instant, rng: &mut impl RandomSource) -> Vec<NodeId> {
        let mut plan = Vec::new();
        for id in seeds {
            // A linked peer is never redialed, even when silent: a second
            // link of the same incarnation would only replace the first.
            let up = self.peers.get(id).is_some_and(|p| p.link);
            if up || self.is_me(id) || plan.contains(id) {
                continue;
            }
            let backoff = self.config.backoff;
            let dial = self.dials.entry(id.clone()).or_insert_with(|| Dial {
                backoff: Backoff::new(backoff),
                next_at: None,
            });
            if dial.next_at.is_some_and(|at| at > now) {
                continue;
            }
            dial.next_at = Some(now + dial.backoff.next_delay(rng));
            plan.push(id.clone());
        }
        plan
    }

    /// When `id` is due to be dialed next (`None` if due now or unknown).
    pub fn next_dial(&self, id: &NodeId) -> Option<Instant> {
        self.dials.get(id).and_then(|d| d.next_at)
    }

    fn is_me(&self, id: &NodeId) -> bool {
        id.as_str() == self.me.name
    }

    fn advance(&mut self, now: Instant, mut events: Vec<MemberEvent>) -> Vec<MemberEvent> {
        let MembershipConfig {
            suspect_after,
            dead_after,
            ..
        } = self.config;
        for (id, p) in &mut self.peers {
            // A linked peer never heard is judged by its link alone.
            let judged = !p.link || p.heard;
            if !judged || p.status == Status::Dead {
                continue;
            }
            // Saturating: a caller's clock going backwards delays, never
            // hastens, a verdict.
            let down_for = now.saturating_duration_since(p.silent_since);
            if matches!(p.status, Status::Up | Status::Down) && down_for >= suspect_after {
                // Suspect always precedes Dead, even when one tick passes
                // both thresholds, so observers see one order.
                p.status = Status::Suspect;
                events.push(MemberEvent::Suspect(id.clone(), p.generation));
            }
            if p.status == Status::Suspect && down_for >= dead_after {
                p.status = Status::Dead;
                events.push(MemberEvent::Dead(id.clone(), p.generation));
            }
        }
        events
    }
}

impl Peer {
    fn up(generation: u64, now: Instant) -> Peer {
        Peer {
            generation,
            status: Status::Up,
            link: true,
            silent_since: now,
            heard: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUSPECT: Duration = Duration::from_secs(1);
    const DEAD: Duration = Duration::from_secs(5);

    fn id(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    fn member() -> Membership {
        let backoff = BackoffConfig::new(Duration::from_millis(100), Duration::from_secs(2));
        let config = MembershipConfig::new(SUSPECT, DEAD, backoff);
        Membership::new(Incarnation::new("me", 1), config, Instant::now())
    }

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn dead_only_after_dead_after_and_suspect_first() {
        let (mut m, t0) = (member(), Instant::now());
        assert_eq!(m.link_up(&id("b"), 1, t0), [MemberEvent::Alive(id("b"), 1)]);
        assert!(m.link_down(&id("b"), 1, ms(t0, 10)).is_empty());
        assert!(m.tick(ms(t0, 1009)).is_empty());
        assert_eq!(m.tick(ms(t0, 1010)), [MemberEvent::Suspect(id("b"), 1)]);
        assert!(m.live_set().contains("b", 1), "a suspect is still live");
        assert!(m.tick(ms(t0, 5009)).is_empty());
        assert_eq!(m.tick(ms(t0, 5010)), [MemberEvent::Dead(id("b"), 1)]);
        assert!(!m.live_set().contains("b", 1));
        assert!(m.tick(ms(t0, 9000)).is_empty(), "dead is reported once");
        assert!(m.settled(ms(t0, 5000)));
    }

    #[test]
    fn one_late_tick_reports_suspect_then_dead() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        m.link_down(&id("b"), 1, t0);
        assert_eq!(
            m.tick(ms(t0, 60_000)),
            [MemberEvent::Suspect(id("b"), 1), MemberEvent::Dead(id("b"), 1)]
        );
    }

    #[test]
    fn a_link_back_before_dead_after_cancels_the_suspicion() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        m.link_down(&id("b"), 1, t0);
        assert!(m.link_up(&id("b"), 1, ms(t0, 500)).is_empty(), "never reported down");
        m.link_down(&id("b"), 1, ms(t0, 1000));
        assert_eq!(m.tick(ms(t0, 2000)), [MemberEvent::Suspect(id("b"), 1)]);
        assert_eq!(m.link_up(&id("b"), 1, ms(t0, 5999)), [MemberEvent::Alive(id("b"), 1)]);
        assert!(m.tick(ms(t0, 60_000)).is_empty());
        assert_eq!(m.status(&id("b")), Some((1, Status::Up)));
    }

    #[test]
    fn a_higher_generation_kills_the_older_at_once_and_a_lower_is_ignored() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        assert_eq!(
            m.link_up(&id("b"), 2, ms(t0, 1)),
            [MemberEvent::Dead(id("b"), 1), MemberEvent::Alive(id("b"), 2)]
        );
        let live = m.live_set();
        assert!(live.contains("b", 2) && !live.contains("b", 1) && live.contains("me", 1));
        assert!(m.link_up(&id("b"), 1, ms(t0, 2)).is_empty());
        assert!(m.link_down(&id("b"), 1, ms(t0, 3)).is_empty(), "the old link closing");
        assert!(m.tick(ms(t0, 60_000)).is_empty());
        assert_eq!(m.status(&id("b")), Some((2, Status::Up)));
        // Already dead when the successor appears: no second Dead.
        m.link_down(&id("b"), 2, ms(t0, 60_000));
        m.tick(ms(t0, 70_000));
        assert_eq!(m.link_up(&id("b"), 3, ms(t0, 70_001)), [MemberEvent::Alive(id("b"), 3)]);
    }

    #[test]
    fn a_healed_partition_brings_a_dead_incarnation_back() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 4, t0);
        m.link_down(&id("b"), 4, t0);
        m.tick(ms(t0, 10_000));
        assert_eq!(m.link_up(&id("b"), 4, ms(t0, 10_001)), [MemberEvent::Alive(id("b"), 4)]);
        assert!(m.live_set().contains("b", 4));
    }

    #[test]
    fn config_is_bounded() {
        let c = MembershipConfig::new(Duration::from_secs(9), Duration::from_secs(3), BackoffConfig::default());
        assert_eq!(
            (c.suspect_after, c.dead_after),
            (Duration::from_secs(3), Duration::from_secs(3))
        );
        let c = MembershipConfig::new(Duration::ZERO, Duration::MAX, BackoffConfig::default());
        assert_eq!(c.dead_after, MAX_DEAD_AFTER);
    }

    #[test]
    fn a_silent_peer_is_dead_after_dead_after_though_its_link_is_up() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        assert!(m.heard(&id("b"), 1, ms(t0, 100)).is_empty());
        // The peer is SIGKILLed at ~100 ms: nothing is heard, the link stays.
        assert!(m.tick(ms(t0, 1099)).is_empty());
        assert_eq!(m.tick(ms(t0, 1100)), [MemberEvent::Suspect(id("b"), 1)]);
        assert_eq!(m.tick(ms(t0, 5100)), [MemberEvent::Dead(id("b"), 1)]);
        assert!(m.linked(&id("b")), "QUIC has not timed the link out yet");
        assert!(!m.live_set().contains("b", 1));
        // Its link timing out later changes nothing.
        assert!(m.link_down(&id("b"), 1, ms(t0, 9000)).is_empty());
        assert!(m.tick(ms(t0, 20_000)).is_empty());
        assert_eq!(m.false_suspicions(), 0);
    }

    #[test]
    fn hearing_a_suspect_again_is_a_false_suspicion() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        m.heard(&id("b"), 1, t0);
        assert_eq!(m.tick(ms(t0, 1000)), [MemberEvent::Suspect(id("b"), 1)]);
        assert_eq!(m.heard(&id("b"), 1, ms(t0, 1200)), [MemberEvent::Alive(id("b"), 1)]);
        assert_eq!((m.false_suspicions(), m.false_deaths()), (1, 0));
        assert_eq!(m.status(&id("b")), Some((1, Status::Up)));
        // A stale generation is not hearing the current one.
        m.link_up(&id("b"), 2, ms(t0, 1300));
        m.heard(&id("b"), 2, ms(t0, 1300));
        // (the time passing still counts for the current one).
        assert_eq!(m.heard(&id("b"), 1, ms(t0, 2400)), [MemberEvent::Suspect(id("b"), 2)]);
    }

    #[test]
    fn a_link_down_after_long_silence_is_judged_from_the_silence() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        m.heard(&id("b"), 1, t0);
        // QUIC's idle timeout fires long after the peer died: the verdict
        // does not wait another dead_after.
        assert_eq!(
            m.link_down(&id("b"), 1, ms(t0, 6000)),
            [MemberEvent::Suspect(id("b"), 1), MemberEvent::Dead(id("b"), 1)]
        );
    }

    #[test]
    fn a_stall_of_our_own_is_forgiven() {
        let (mut m, t0) = (member(), Instant::now());
        m.link_up(&id("b"), 1, t0);
        m.heard(&id("b"), 1, t0);
        // This process did not run for 3 s: the peer is not to blame.
        m.forgive(ms(t0, 3000));
        assert!(m.tick(ms(t0, 3000)).is_empty());
        assert_eq!(m.tick(ms(t0, 4000)), [MemberEvent::Suspect(id("b"), 1)]);
    }

    #[test]
    fn a_link_up_brings_backed_off_redials_forward() {
        let (mut m, t0) = (member(), Instant::now());
        let mut rng = || 0xdead_beef_u64;
        let seeds = [id("b"), id("c")];
        // b keeps failing for a minute: its backoff grows to the 2 s cap.
        let mut now = t0;
        while now < ms(t0, 60_000) {
            m.dial_plan(&seeds, now, &mut rng);
            now += Duration::from_millis(10);
        }
        m.link_up(&id("c"), 1, now);
        let next = m.next_dial(&id("b")).expect("scheduled");
        assert!(
            next <= now + Duration::from_millis(100),
            "b is redialed {:?} after the heal",
            next - now
        );
    }

    #[test]
    fn dial_plan_backs_off_per_peer_and_resets_on_link_up() {
        let (mut m, t0) = (member(), Instant::now());
        let mut state = 7u64;
        // A fixed-seed xorshift: enough randomness for scheduling here.
        let mut rng = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let seeds = [id("me"), id("b"), id("c")];
        assert_eq!(m.dial_plan(&seeds, t0, &mut rng), [id("b"), id("c")]);
        assert!(m.dial_plan(&seeds, t0, &mut rng).is_empty(), "backing off");
        let next_b = m.next_dial(&id("b")).unwrap();
        assert!(next_b >= ms(t0, 100) && next_b <= ms(t0, 200));
        m.link_up(&id("c"), 1, t0);
        assert_eq!(m.next_dial(&id("c")), None);
        // Keep failing b: the gaps grow up to the 2 s cap and c, up, is
        // never dialed.
        let (mut now, mut dials) = (t0, 0);
        while now < ms(t0, 30_000) {
            now += Duration::from_millis(10);
            let plan = m.dial_plan(&seeds, now, &mut rng);
            assert!(!plan.contains(&id("c")));
            dials += plan.len();
        }
        assert!((15..=150).contains(&dials), "{dials} dials of b in 30 s");
        m.link_down(&id("c"), 1, now);
        assert_eq!(m.dial_plan(&seeds, now, &mut rng), [id("c")]);
    }
}
