//! The ractor dispatch targets: one actor, or every member of a process
//! group. They belong to the runtime (they speak ractor); the rest of
//! [dispatch](crate::signal::dispatch) sits in the pure core.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ractor::{ActorCell, ActorRef, Message, MessagingErr, pg};

use crate::error::{Error, Result};
use crate::signal::Signal;
use crate::signal::dispatch::{
    DEFAULT_TIMEOUT, Dispatch, invalid_options, invalid_target, target_not_alive, timeout,
};

/// Something that accepts signals: an actor, an agent, a mailbox.
///
/// Implemented for every `ActorRef<M>` whose message type converts from a
/// [`Signal`]; the agent runtime implements it for agent refs. Use it
/// behind [`ActorTarget`].
///
/// ```
/// use jido::signal::Signal;
///
/// enum Msg { Signal(Signal) }
/// impl From<Signal> for Msg {
///     fn from(s: Signal) -> Self { Msg::Signal(s) }
/// }
/// // Needed only when something in the build enables `ractor/cluster`.
/// # #[cfg(feature = "cluster")]
/// impl ractor::Message for Msg {}
/// // Now every `ractor::ActorRef<Msg>` is a `SignalSink`.
/// ```
pub trait SignalSink: Send + Sync + 'static {
    /// Hands the signal over without waiting for it to be handled.
    ///
    /// # Errors
    ///
    /// [`target_not_alive`](crate::signal::dispatch::target_not_alive) when the target is
    /// gone; [`invalid_target`](crate::signal::dispatch::invalid_target) when it cannot take
    /// signals.
    fn send_signal(&self, signal: Signal) -> Result<()>;

    /// Hands the signal over and waits until the target has taken it, at
    /// most `timeout`. The default just calls
    /// [`send_signal`](SignalSink::send_signal); targets with a
    /// request/reply protocol (agents) override it.
    ///
    /// # Errors
    ///
    /// As [`send_signal`](SignalSink::send_signal), or a timeout.
    fn call_signal(&self, signal: Signal, timeout: Duration) -> BoxFuture<'_, Result<()>> {
        let _ = timeout;
        let result = self.send_signal(signal);
        Box::pin(async move { result })
    }

    /// A name for telemetry and errors (e.g. the actor id).
    fn describe(&self) -> String;
}

fn describe_cell(cell: &ActorCell) -> String {
    match cell.get_name() {
        Some(name) => format!("{}({})", name, cell.get_id()),
        None => cell.get_id().to_string(),
    }
}

fn messaging_error<T>(err: MessagingErr<T>, target: &str) -> Error {
    match err {
        MessagingErr::InvalidActorType => {
            invalid_target("actor does not accept this message type", target)
        }
        _ => target_not_alive(target),
    }
}

impl<M> SignalSink for ActorRef<M>
where
    M: Message + From<Signal>,
{
    fn send_signal(&self, signal: Signal) -> Result<()> {
        self.send_message(M::from(signal))
            .map_err(|e| messaging_error(e, &self.describe()))
    }

    fn describe(&self) -> String {
        describe_cell(&self.get_cell())
    }
}

/// How an [`ActorTarget`] hands a signal over.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeliveryMode {
    /// Send and move on (a ractor cast). The default.
    #[default]
    Async,
    /// Wait until the target took it ([`SignalSink::call_signal`]), at most
    /// the target's timeout.
    Sync,
}

/// Delivers to one actor (Jido's `:pid` adapter).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> jido::Result<()> {
/// use jido::signal::Signal;
/// use jido::server::ActorTarget;
/// use jido::signal::dispatch::DispatchConfig;
/// use ractor::{Actor, ActorProcessingErr, ActorRef};
///
/// struct Echo;
/// enum Msg { Signal(Signal) }
/// impl From<Signal> for Msg { fn from(s: Signal) -> Self { Msg::Signal(s) } }
/// # #[cfg(feature = "cluster")]
/// # impl ractor::Message for Msg {}
///
/// impl Actor for Echo {
///     type Msg = Msg;
///     type State = tokio::sync::mpsc::UnboundedSender<String>;
///     type Arguments = tokio::sync::mpsc::UnboundedSender<String>;
///     async fn pre_start(&self, _: ActorRef<Msg>, tx: Self::Arguments) -> Result<Self::State, ActorProcessingErr> {
///         Ok(tx)
///     }
///     async fn handle(&self, _: ActorRef<Msg>, msg: Msg, tx: &mut Self::State) -> Result<(), ActorProcessingErr> {
///         let Msg::Signal(s) = msg;
///         let _ = tx.send(s.ty().to_owned());
///         Ok(())
///     }
/// }
///
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let (actor, handle) = Actor::spawn(None, Echo, tx).await.unwrap();
/// let config = DispatchConfig::new(ActorTarget::new(actor.clone()))?;
/// config.dispatch(&Signal::new("hello", serde_json::Value::Null)).await?;
/// assert_eq!(rx.recv().await.as_deref(), Some("hello"));
///
/// actor.stop(None);
/// handle.await.unwrap();
/// let err = config.dispatch(&Signal::new("hello", serde_json::Value::Null)).await.unwrap_err();
/// assert_eq!(err.kind(), jido::ErrorKind::NotFound);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ActorTarget {
    sink: Arc<dyn SignalSink>,
    mode: DeliveryMode,
    timeout: Duration,
}

impl fmt::Debug for ActorTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ActorTarget")
            .field("target", &self.sink.describe())
            .field("mode", &self.mode)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ActorTarget {
    /// Delivers to `sink` (e.g. an `ActorRef<M>`), asynchronously.
    pub fn new(sink: impl SignalSink) -> Self {
        Self::from_arc(Arc::new(sink))
    }

    /// Delivers to a shared sink, asynchronously.
    pub fn from_arc(sink: Arc<dyn SignalSink>) -> Self {
        Self {
            sink,
            mode: DeliveryMode::Async,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Sets the delivery mode.
    #[must_use]
    pub fn mode(mut self, mode: DeliveryMode) -> Self {
        self.mode = mode;
        self
    }

    /// Sets the timeout of synchronous delivery (default 5 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

impl Dispatch for ActorTarget {
    fn adapter(&self) -> &'static str {
        "actor"
    }

    fn target(&self) -> String {
        self.sink.describe()
    }

    fn target_kind(&self) -> &'static str {
        "actor"
    }

    fn validate(&self) -> Result<()> {
        if self.timeout.is_zero() {
            return Err(invalid_options(
                "actor delivery timeout must be positive",
                &self.sink.describe(),
                "timeout",
            ));
        }
        Ok(())
    }

    /// A cast ([`DeliveryMode::Async`]) is delivered at once; synchronous
    /// delivery waits for the target, so it answers `None`.
    fn deliver_now(&self, signal: &Signal) -> Option<Result<()>> {
        match self.mode {
            DeliveryMode::Async => Some(self.sink.send_signal(signal.clone())),
            DeliveryMode::Sync => None,
        }
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            match self.mode {
                DeliveryMode::Async => self.sink.send_signal(signal.clone()),
                DeliveryMode::Sync => {
                    match tokio::time::timeout(
                        self.timeout,
                        self.sink.call_signal(signal.clone(), self.timeout),
                    )
                    .await
                    {
                        Ok(result) => result,
                        Err(_) => Err(timeout(&self.sink.describe(), self.timeout)),
                    }
                }
            }
        })
    }
}

/// Delivers to every member of a `ractor::pg` process group, converting
/// the signal with `M: From<Signal>` for each member.
///
/// An empty group is a success (as a broadcast to no subscriber). Members
/// that stopped meanwhile are skipped. A member whose message type is not
/// `M` fails the delivery with `invalid_target` after the others were
/// served.
///
/// ```
/// use jido::server::GroupTarget;
/// use jido::signal::dispatch::DispatchConfig;
/// # use jido::signal::Signal;
/// # enum Msg { Signal(Signal) }
/// # impl From<Signal> for Msg { fn from(s: Signal) -> Self { Msg::Signal(s) } }
/// # #[cfg(feature = "cluster")]
/// # impl ractor::Message for Msg {}
///
/// let config = DispatchConfig::new(GroupTarget::<Msg>::new("orders"))?;
/// # Ok::<(), jido::Error>(())
/// ```
pub struct GroupTarget<M> {
    scope: Option<String>,
    group: String,
    _message: PhantomData<fn() -> M>,
}

impl<M> Clone for GroupTarget<M> {
    fn clone(&self) -> Self {
        Self {
            scope: self.scope.clone(),
            group: self.group.clone(),
            _message: PhantomData,
        }
    }
}

impl<M> fmt::Debug for GroupTarget<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupTarget")
            .field("scope", &self.scope)
            .field("group", &self.group)
            .finish()
    }
}

impl<M> GroupTarget<M> {
    /// Delivers to the group `group` of the default scope.
    pub fn new(group: impl Into<String>) -> Self {
        Self {
            scope: None,
            group: group.into(),
            _message: PhantomData,
        }
    }

    /// Delivers to the group `group` of `scope`.
    pub fn scoped(scope: impl Into<String>, group: impl Into<String>) -> Self {
        Self {
            scope: Some(scope.into()),
            group: group.into(),
            _message: PhantomData,
        }
    }

    fn name(&self) -> String {
        match &self.scope {
            Some(scope) => format!("pg:{scope}/{}", self.group),
            None => format!("pg:{}", self.group),
        }
    }
}

impl<M> Dispatch for GroupTarget<M>
where
    M: Message + From<Signal>,
{
    fn adapter(&self) -> &'static str {
        "pg"
    }

    fn target(&self) -> String {
        self.name()
    }

    fn target_kind(&self) -> &'static str {
        "group"
    }

    fn validate(&self) -> Result<()> {
        if self.group.is_empty() {
            return Err(invalid_options(
                "process group name is empty",
                &self.name(),
                "group",
            ));
        }
        Ok(())
    }

    /// Casts to every member: always at once.
    fn deliver_now(&self, signal: &Signal) -> Option<Result<()>> {
        Some(self.cast_all(signal))
    }

    fn deliver<'a>(&'a self, signal: &'a Signal) -> BoxFuture<'a, Result<()>> {
        let result = self.cast_all(signal);
        Box::pin(async move { result })
    }
}

impl<M> GroupTarget<M>
where
    M: Message + From<Signal>,
{
    fn cast_all(&self, signal: &Signal) -> Result<()> {
        let members = match &self.scope {
            Some(scope) => pg::get_scoped_members(scope, &self.group),
            None => pg::get_members(&self.group),
        };
        let total = members.len();
        let mut wrong_type = 0usize;
        for member in members {
            match member.send_message::<M>(M::from(signal.clone())) {
                Ok(()) => {}
                Err(MessagingErr::InvalidActorType) => wrong_type += 1,
                // Stopped meanwhile: it is leaving the group.
                Err(_) => {}
            }
        }
        if wrong_type > 0 {
            return Err(invalid_target(
                format!("{wrong_type} of {total} group members do not accept this message type"),
                &self.name(),
            )
            .with_detail("members", total)
            .with_detail("failed", wrong_type));
        }
        Ok(())
    }
}
