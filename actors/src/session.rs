//! Session actors (one per client connection) and the listener supervisor
//! that owns them.
//!
//! A session actor runs its protocol conversation to the end and stops. A
//! panic anywhere in it is caught by ractor and reported to the listener
//! supervisor, which counts it and carries on: the connection is lost, the
//! process and every other session are not. Sessions are never restarted (a
//! connection cannot be), so the supervisor overrides ractor's default of
//! stopping itself when a child exits.

use async_trait::async_trait;
use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use crate::live::LiveGuard;

/// One client conversation (SMTP, LMTP, IMAP...).
#[async_trait]
pub trait Session: Send + 'static {
    /// The live-actor kind, e.g. `"smtp_session"`.
    fn kind(&self) -> &'static str;
    /// Runs the conversation until the client leaves or is dropped.
    async fn run(self: Box<Self>);
}

#[derive(ractor_cluster_derive::RactorMessage)]
pub enum SessionMsg {
    Run,
}

pub struct SessionActor;

pub struct SessionState {
    session: Option<Box<dyn Session>>,
    _live: LiveGuard,
}

impl Actor for SessionActor {
    type Msg = SessionMsg;
    type State = SessionState;
    type Arguments = Box<dyn Session>;

    async fn pre_start(
        &self,
        me: ActorRef<SessionMsg>,
        session: Box<dyn Session>,
    ) -> Result<SessionState, ActorProcessingErr> {
        let live = LiveGuard::new(session.kind());
        me.cast(SessionMsg::Run)?;
        Ok(SessionState {
            session: Some(session),
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
                if let Some(session) = st.session.take() {
                    session.run().await;
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
                if let Err(e) = Actor::spawn_linked(None, SessionActor, session, me.get_cell()).await {
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
