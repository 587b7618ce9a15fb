//! Session actors (one per client connection) and the listener supervisor
//! that owns them.
//!
//! A session actor runs its protocol conversation to the end and stops. A
//! panic anywhere in it is caught by ractor and reported to the listener
//! supervisor, which counts it and carries on: the connection is lost, the
//! process and every other session are not. Sessions are never restarted (a
//! connection cannot be), so the supervisor overrides ractor's default of
//! stopping itself when a child exits.
//!
//! A session that will wait a long time for its client (IMAP IDLE) may end
//! its run *parked*: it hands back the little it needs to wait (socket,
//! state), its actor stops, and a plain task waits on it. When the client
//! speaks or the store changes, the wait yields a session again and the
//! listener supervisor starts a new actor for it. An actor costs ~10 KB
//! (its four channels), and an IDLE client may sit for 29 minutes (issue 15:
//! <= 8 KB per idle IMAP session); the parked wait holds no store handle
//! and runs no protocol code, so there is nothing in it to supervise.

use async_trait::async_trait;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::live::LiveGuard;

/// One client conversation (SMTP, LMTP, IMAP...).
#[async_trait]
pub trait Session: Send + 'static {
    /// The live-actor kind, e.g. `"smtp_session"`.
    fn kind(&self) -> &'static str;
    /// Runs the conversation until the client leaves or is dropped, or
    /// until it parks.
    async fn run(self: Box<Self>) -> Ended;
}

/// How a session's run ended.
pub enum Ended {
    /// The conversation is over; the connection is closed.
    Closed,
    /// The session waits for its client without an actor.
    Parked(Box<dyn Parked>),
}

/// A session waiting without an actor (see the module's notes).
#[async_trait]
pub trait Parked: Send + 'static {
    /// The listener-level kind, for the parked-sessions gauge.
    fn kind(&self) -> &'static str;
    /// Waits until the session has work again and returns it to run.
    async fn wake(self: Box<Self>) -> Box<dyn Session>;
}

/// Counts a parked session in `meshmail_sessions_parked{kind}` while it lives.
struct ParkedGauge(&'static str);

impl ParkedGauge {
    fn new(kind: &'static str) -> Self {
        metrics::gauge!("meshmail_sessions_parked", "kind" => kind).increment(1.0);
        metrics::counter!("meshmail_session_parks_total", "kind" => kind).increment(1);
        ParkedGauge(kind)
    }
}

impl Drop for ParkedGauge {
    fn drop(&mut self) {
        metrics::gauge!("meshmail_sessions_parked", "kind" => self.0).decrement(1.0);
    }
}

/// Waits on a parked session and hands it back to `listener` when it wakes.
/// If the listener is gone (the node is stopping) the session is dropped,
/// which closes its connection.
fn park(parked: Box<dyn Parked>, listener: ActorRef<ListenerMsg>) {
    tokio::spawn(async move {
        let gauge = ParkedGauge::new(parked.kind());
        let session = parked.wake().await;
        drop(gauge);
        if listener.cast(ListenerMsg::Spawn(session)).is_err() {
            tracing::debug!("a parked session woke after its listener stopped");
        }
    });
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum SessionMsg {
    Run,
}

pub struct SessionActor;

pub struct SessionState {
    session: Option<Box<dyn Session>>,
    /// Where a parked session goes back to when it wakes.
    listener: ActorRef<ListenerMsg>,
    _live: LiveGuard,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = (Box<dyn Session>, ActorRef<ListenerMsg>);

    async fn pre_start(
        &self,
        me: ActorRef<SessionMsg>,
        (session, listener): (Box<dyn Session>, ActorRef<ListenerMsg>),
    ) -> Result<SessionState, ActorProcessingErr> {
        let live = LiveGuard::new(session.kind());
        me.cast(SessionMsg::Run)?;
        Ok(SessionState {
            session: Some(session),
            listener,
            _live: live,
        })
    }

    async fn handle(
        &self,
        me: ActorRef<SessionMsg>,
        msg: SessionMsg,
        st: &mut SessionState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SessionMsg::Run => {
                if let Some(session) = st.session.take()
                    && let Ended::Parked(parked) = session.run().await
                {
                    park(parked, st.listener.clone());
                }
                me.stop(None);
            }
        }
        Ok(())
    }
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum ListenerMsg {
    /// A new connection: start its session actor.
    Spawn(Box<dyn Session>),
}

/// Supervises the session actors of one listener (smtp, submission, lmtp...).
pub struct ListenerSupervisor;

pub struct ListenerState {
    name: &'static str,
    _live: LiveGuard,
}

impl Actor for ListenerSupervisor {
    type Msg = ListenerMsg;
    type State = ListenerState;
    type Arguments = &'static str;

    async fn pre_start(
        &self,
        _me: ActorRef<ListenerMsg>,
        name: &'static str,
    ) -> Result<ListenerState, ActorProcessingErr> {
        Ok(ListenerState {
            name,
            _live: LiveGuard::new("listener_supervisor"),
        })
    }

    async fn handle(
        &self,
        me: ActorRef<ListenerMsg>,
        msg: ListenerMsg,
        st: &mut ListenerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ListenerMsg::Spawn(session) => {
                if let Err(e) = Actor::spawn_linked(None, SessionActor, (session, me.clone()), me.get_cell()).await {
                    tracing::error!(listener = st.name, error = %e, "could not start a session actor");
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _me: ActorRef<ListenerMsg>,
        evt: SupervisionEvent,
        st: &mut ListenerState,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(_, err) = evt {
            metrics::counter!("meshmail_session_panics_total", "listener" => st.name).increment(1);
            tracing::error!(listener = st.name, error = %err, "session crashed (contained; the listener keeps serving)");
        }
        Ok(())
    }
}

/// Starts a listener supervisor.
pub async fn start_listener(name: &'static str) -> Result<ActorRef<ListenerMsg>, ActorProcessingErr> {
    let (sup, _) = Actor::spawn(None, ListenerSupervisor, name).await?;
    Ok(sup)
}
