//! Executing directives: the built-ins, the error policy and custom
//! directives.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures::FutureExt;
use ractor::ActorRef;
use serde_json::{Map, Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::Instrument;

use super::actor::AgentServerState;
use super::msg::AgentMsg;
use super::options::{ErrorDecision, ErrorEvent, ErrorPolicy};
use super::{AgentRef, Jido, signal_types};
use crate::agent::{AgentState, CmdOptions};
use crate::directive::{CustomDirective, Directive, ScheduledMessage, StopReason, error_context};
use crate::error::{Error, sanitize, sanitize_str};
use crate::exec::Exec;
use crate::exec::panic_message;
use crate::instruction::Instruction;
use crate::signal::Signal;
use crate::signal::dispatch::{CircuitBreakers, DispatchConfig};
use crate::strategy::instruction_feedback;

/// What executing one directive led to (Jido's `DirectiveExec` results).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirectiveResult {
    /// Done; go on with the next directive.
    Ok,
    /// Work was started elsewhere (a task, a timer, another actor), with an
    /// optional reference for tracking.
    Async(Option<String>),
    /// Stop the agent with this reason. Queued directives are dropped.
    Stop(StopReason),
}

impl DirectiveResult {
    /// `"ok"`, `"async"` or `"stop"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            DirectiveResult::Ok => "ok",
            DirectiveResult::Async(_) => "async",
            DirectiveResult::Stop(_) => "stop",
        }
    }
}

/// What a custom directive's executor sees: the agent and the runtime
/// around it.
pub struct DirectiveContext<'a> {
    state: &'a AgentServerState,
}

impl DirectiveContext<'_> {
    /// The agent, as it is now.
    pub fn agent(&self) -> &AgentState {
        &self.state.agent
    }

    /// The agent's id.
    pub fn agent_id(&self) -> &str {
        &self.state.id
    }

    /// The running agent, e.g. to cast the result of async work back to it.
    pub fn myself(&self) -> AgentRef {
        self.state.agent_ref()
    }

    /// The executor (and task supervisor) of the agent's instance: spawn
    /// async work on `exec().supervisor()` so that shutdown cancels it.
    pub fn exec(&self) -> &Exec {
        &self.state.exec
    }

    /// The instance, when the agent runs in one.
    pub fn jido(&self) -> Option<&Jido> {
        self.state.jido.as_ref()
    }

    /// Whether the agent's own child table holds `tag`: a child started by
    /// SpawnAgent or adopted, tracked or still starting. Children that an
    /// executor or the instance's child host keeps elsewhere
    /// ([`DirectiveExec::holds_child`], [`ChildHost::holds_child`](super::ChildHost::holds_child))
    /// are not counted: one that keeps children checks this before it
    /// takes a tag, so one tag never names two children.
    pub fn has_local_child(&self, tag: &str) -> bool {
        self.state.local_tag_taken(tag)
    }
}

/// The executor of a custom directive type (Jido's `DirectiveExec`
/// protocol).
///
/// # Registering executors: once, inherited
///
/// Register an executor once, where it should apply; it is looked up by
/// the directive's type when a directive of that type is executed:
///
/// * for every agent of an instance:
///   [`JidoConfig::directive_exec`](super::JidoConfig::directive_exec)
///   (the instance's default options);
/// * for one agent: [`ServerOptions::directive_exec`](super::ServerOptions::directive_exec)
///   (an agent's own executor wins over the instance's for the same type);
/// * children started by SpawnAgent inherit their parent's executors
///   (with the instance's under them), so a tree of agents needs nothing
///   registered per child.
///
/// Extensions register theirs the same way (the AI layer's `AiRuntime`
/// has `register_instance(JidoConfig)` and `register(ServerOptions)`).
///
/// A custom directive without an executor is an error: a warning
/// `jido.agent_server.directive.unhandled`, and a configuration error "no
/// executor for directive TYPE" (details `directive_type`, `agent_id`;
/// context `directive`) handed to the error policy.
///
/// `exec` runs inside the agent's handler: keep it short and start longer
/// work in a task (see [`DirectiveContext::exec`]), returning
/// [`DirectiveResult::Async`]. A panic **crashes the agent**: its
/// supervisor sees `ActorFailed` ("directive TYPE panicked: MESSAGE") and
/// restarts it by its policy; the children and parent see it as a crash.
///
/// ```
/// use jido::directive::CustomDirective;
/// use jido::server::{DirectiveContext, DirectiveExec, DirectiveResult, ServerOptions};
/// use jido::signal::Signal;
///
/// #[derive(Debug)]
/// struct Notify { channel: String }
/// impl CustomDirective for Notify {}
///
/// struct NotifyExec;
/// impl DirectiveExec for NotifyExec {
///     type Directive = Notify;
///     fn exec(&self, d: &Notify, _input: &Signal, ctx: &DirectiveContext<'_>) -> DirectiveResult {
///         println!("{} -> {}", ctx.agent_id(), d.channel);
///         DirectiveResult::Ok
///     }
/// }
///
/// let opts = ServerOptions::new().directive_exec(NotifyExec);
/// # let _ = opts;
/// ```
pub trait DirectiveExec: Send + Sync + 'static {
    /// The directive type this executes.
    type Directive: CustomDirective;

    /// Executes one directive. `input` is the signal whose `cmd` produced
    /// it.
    fn exec(
        &self,
        directive: &Self::Directive,
        input: &Signal,
        ctx: &DirectiveContext<'_>,
    ) -> DirectiveResult;

    /// Rebuilds a directive from the data form its
    /// [`CustomDirective::durable`] gave, when a durable agent restores
    /// its outbox (feature `persist`). The default `None` means the type
    /// is not durable: a stored one is dropped with a warning.
    ///
    /// ```
    /// use jido::directive::CustomDirective;
    /// use jido::server::{DirectiveContext, DirectiveExec, DirectiveResult};
    /// use jido::signal::Signal;
    /// use serde_json::{Value, json};
    ///
    /// #[derive(Debug)]
    /// struct Notify { channel: String }
    /// impl CustomDirective for Notify {
    ///     fn durable(&self) -> Option<Value> { Some(json!({"channel": self.channel})) }
    /// }
    ///
    /// struct NotifyExec;
    /// impl DirectiveExec for NotifyExec {
    ///     type Directive = Notify;
    ///     fn exec(&self, _: &Notify, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
    ///         DirectiveResult::Ok
    ///     }
    ///     fn decode(&self, data: &Value) -> Option<jido::Result<Notify>> {
    ///         let channel = data.get("channel")?.as_str()?.to_owned();
    ///         Some(Ok(Notify { channel }))
    ///     }
    /// }
    /// let d = NotifyExec.decode(&json!({"channel": "ops"})).unwrap().unwrap();
    /// assert_eq!(d.channel, "ops");
    /// ```
    ///
    /// # Errors
    ///
    /// `Some(Err(..))` for a value that is not a directive of this type
    /// (it is dropped with a warning).
    fn decode(&self, data: &Value) -> Option<crate::error::Result<Self::Directive>> {
        let _ = data;
        None
    }

    /// The child table's hook, for executors that start children of their
    /// own (as the instance's [`ChildHost`](super::ChildHost) does for
    /// every agent): the built-in
    /// [`Directive::StopChild`] of a tag the agent's own child table does
    /// not hold is offered to every executor registered on the agent, and
    /// the one that keeps a child of the agent tagged `tag` stops it and
    /// answers `Some(result)`. The default `None` means "not one of
    /// mine"; when no executor claims the tag, the instance's child host
    /// is asked, and when it does not either, the StopChild is the no-op
    /// of an unknown tag (debug log).
    ///
    /// ```
    /// use jido::directive::{CustomDirective, StopReason};
    /// use jido::server::{DirectiveContext, DirectiveExec, DirectiveResult};
    /// use jido::signal::Signal;
    ///
    /// #[derive(Debug)]
    /// struct Lease { tag: String }
    /// impl CustomDirective for Lease {}
    ///
    /// /// Keeps children outside the agent (one tag here: "lease").
    /// struct LeaseExec;
    /// impl DirectiveExec for LeaseExec {
    ///     type Directive = Lease;
    ///     fn exec(&self, _: &Lease, _: &Signal, _: &DirectiveContext<'_>) -> DirectiveResult {
    ///         DirectiveResult::Ok
    ///     }
    ///     fn holds_child(&self, tag: &str, _: &DirectiveContext<'_>) -> bool {
    ///         tag == "lease"
    ///     }
    ///     fn stop_child(
    ///         &self,
    ///         tag: &str,
    ///         _reason: &StopReason,
    ///         ctx: &DirectiveContext<'_>,
    ///     ) -> Option<DirectiveResult> {
    ///         self.holds_child(tag, ctx).then(|| DirectiveResult::Async(Some(tag.to_owned())))
    ///     }
    /// }
    /// ```
    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        let _ = (tag, reason, ctx);
        None
    }

    /// Whether this executor keeps a child of the agent tagged `tag`
    /// (running or starting): such a tag is taken, and a SpawnAgent or
    /// AdoptChild under it is refused as for a tag of the agent's own
    /// table. Default `false`.
    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool {
        let _ = (tag, ctx);
        false
    }
}

pub(crate) trait ErasedExec: Send + Sync + 'static {
    fn exec(
        &self,
        directive: &(dyn CustomDirective + 'static),
        input: &Signal,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult>;

    /// The name of the directive type this executes (its default
    /// [`CustomDirective::type_name`]).
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    fn directive_type(&self) -> &'static str;

    /// Rebuilds a stored directive of this type.
    #[cfg_attr(not(feature = "persist"), allow(dead_code))]
    fn decode(&self, data: &Value) -> Option<crate::error::Result<Arc<dyn CustomDirective>>>;

    /// [`DirectiveExec::stop_child`].
    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult>;

    /// [`DirectiveExec::holds_child`].
    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool;
}

pub(crate) struct TypedExec<E> {
    exec: E,
    _d: PhantomData<fn()>,
}

impl<E> TypedExec<E> {
    pub(crate) fn new(exec: E) -> Self {
        Self {
            exec,
            _d: PhantomData,
        }
    }
}

impl<E: DirectiveExec> ErasedExec for TypedExec<E> {
    fn exec(
        &self,
        directive: &(dyn CustomDirective + 'static),
        input: &Signal,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        let d = directive.downcast_ref::<E::Directive>()?;
        Some(self.exec.exec(d, input, ctx))
    }

    fn directive_type(&self) -> &'static str {
        std::any::type_name::<E::Directive>()
    }

    fn decode(&self, data: &Value) -> Option<crate::error::Result<Arc<dyn CustomDirective>>> {
        let decoded = self.exec.decode(data)?;
        Some(decoded.map(|d| Arc::new(d) as Arc<dyn CustomDirective>))
    }

    fn stop_child(
        &self,
        tag: &str,
        reason: &StopReason,
        ctx: &DirectiveContext<'_>,
    ) -> Option<DirectiveResult> {
        self.exec.stop_child(tag, reason, ctx)
    }

    fn holds_child(&self, tag: &str, ctx: &DirectiveContext<'_>) -> bool {
        self.exec.holds_child(tag, ctx)
    }
}

impl AgentServerState {
    /// Executes one directive (one drain step).
    pub(crate) async fn exec_directive(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: Arc<Signal>,
        directive: Directive,
    ) -> DirectiveResult {
        let kind = directive.kind();
        self.record(
            "directive_started",
            || json!({"type": kind, "signal_type": input.ty()}),
        );
        let span = tracing::debug_span!(
            target: "jido::agent_server",
            "jido.agent_server.directive",
            agent_id = %self.id,
            agent_module = self.agent.name(),
            signal_type = input.ty(),
            directive_type = kind,
            jido_instance = self.instance_name(),
        );
        let started = Instant::now();
        let result = self
            .exec_inner(myself, &input, directive)
            .instrument(span)
            .await;
        tracing::debug!(
            name: "jido.agent_server.directive.stop",
            target: "jido::agent_server",
            agent_id = %self.id,
            agent_module = self.agent.name(),
            signal_type = input.ty(),
            directive_type = kind,
            jido_instance = self.instance_name(),
            result = result.as_str(),
            duration_us = started.elapsed().as_micros() as u64,
            "jido.agent_server.directive.stop"
        );
        result
    }

    async fn exec_inner(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Arc<Signal>,
        directive: Directive,
    ) -> DirectiveResult {
        match directive {
            Directive::Emit { signal, dispatch } => {
                self.emit_directive(myself, input, signal, dispatch)
            }
            Directive::EmitToParent { signal, parent_id } => {
                self.emit_to_parent(signal, &parent_id)
            }
            Directive::Error { error, context } => {
                self.apply_error_policy(myself, input, &error, &context)
            }
            Directive::Spawn { child, tag } => {
                let agent_id = self.id.to_string();
                let name = child.name().to_owned();
                let started = self.exec.supervisor().spawn(async move {
                    if let Err(err) = child.start().await {
                        tracing::error!(
                            target: "jido::agent_server",
                            agent_id = %agent_id,
                            child = %name,
                            tag = ?tag,
                            error = %err,
                            "spawn directive failed"
                        );
                    }
                });
                match started {
                    Ok(_) => DirectiveResult::Async(None),
                    Err(err) => {
                        tracing::error!(target: "jido::agent_server", agent_id = %self.id, error = %err, "spawn directive failed");
                        DirectiveResult::Ok
                    }
                }
            }
            Directive::SpawnAgent {
                agent,
                tag,
                options,
                meta,
                restart,
            } => self.spawn_child(myself, input, agent, tag, options, meta, restart),
            Directive::AdoptChild { child, tag, meta } => {
                self.adopt_child(myself, &child, tag, meta)
            }
            Directive::StopChild { tag, reason } => self.stop_child(&tag, &reason),
            Directive::Schedule { delay, message } => {
                let signal = self.scheduled_signal(message);
                self.schedule(myself, delay, signal);
                DirectiveResult::Async(None)
            }
            Directive::Cron {
                cron,
                message,
                job_id,
                timezone,
            } => self.add_cron(myself, cron, message, job_id, timezone),
            Directive::CronCancel { job_id } => self.cancel_cron(&job_id),
            Directive::RunInstruction {
                instruction,
                result_action,
                meta,
            } => self.run_instruction(myself, input, *instruction, result_action, meta),
            Directive::Stop { reason } => {
                if matches!(reason.as_str(), "completed" | "ok" | "done" | "success") {
                    tracing::warn!(
                        target: "jido::agent_server",
                        agent_id = %self.id,
                        reason = %reason,
                        "stop directive used for completion; set state status to \"completed\" instead"
                    );
                }
                DirectiveResult::Stop(reason)
            }
            Directive::Custom(custom) => self.exec_custom(myself, input, custom.as_ref()),
        }
    }

    fn exec_custom(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Signal,
        custom: &(dyn CustomDirective + 'static),
    ) -> DirectiveResult {
        let type_id = Any::type_id(custom.as_any());
        let Some(exec) = self.settings.executors.get(&type_id).cloned() else {
            return self.unhandled_directive(myself, input, custom.type_name());
        };
        let ctx = DirectiveContext { state: self };
        match catch_unwind(AssertUnwindSafe(|| exec.exec(custom, input, &ctx))) {
            Ok(Some(result)) => result,
            // Registered under this type but not for it: cannot happen with
            // `directive_exec`, and is no reason to skip silently.
            Ok(None) => self.unhandled_directive(myself, input, custom.type_name()),
            Err(panic) => {
                // An executor panic crashes the agent (its supervisor sees
                // ActorFailed and restarts it by its policy).
                self.extras_mut().crash = Some(format!(
                    "directive {} panicked: {}",
                    custom.type_name(),
                    panic_message(&*panic)
                ));
                DirectiveResult::Ok
            }
        }
    }

    /// A custom directive no executor handles: a warning, and a
    /// configuration error "no executor for directive TYPE" (context
    /// `directive`) for the error policy. Never a silent skip.
    fn unhandled_directive(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Signal,
        directive_type: &'static str,
    ) -> DirectiveResult {
        tracing::warn!(
            name: "jido.agent_server.directive.unhandled",
            target: "jido::agent_server",
            agent_id = %self.id,
            directive_type,
            signal_type = input.ty(),
            "no executor for directive {directive_type}"
        );
        let error = Error::configuration(format!("no executor for directive {directive_type}"))
            .with_detail("directive_type", directive_type)
            .with_detail("agent_id", self.id.to_string());
        self.apply_error_policy(myself, input, &error, error_context::DIRECTIVE)
    }

    /// The child table's hook: a StopChild of `tag`, which the agent's own
    /// table does not hold, offered to the registered executors
    /// ([`DirectiveExec::stop_child`]), then to the instance's child host
    /// ([`ChildHost::stop_child`](super::ChildHost::stop_child)). `None`
    /// when none keeps the child. A panic crashes the agent, as in
    /// [`DirectiveExec::exec`].
    pub(crate) fn offer_stop_child(
        &mut self,
        tag: &str,
        reason: &StopReason,
    ) -> Option<DirectiveResult> {
        let executors = self.settings.executors.clone();
        let host = self.jido.as_ref().and_then(Jido::child_host);
        let ctx = DirectiveContext { state: self };
        let found = catch_unwind(AssertUnwindSafe(|| {
            executors
                .values()
                .find_map(|exec| exec.stop_child(tag, reason, &ctx))
                .or_else(|| host.and_then(|h| h.stop_child(tag, reason, &ctx)))
        }));
        match found {
            Ok(result) => result,
            Err(panic) => {
                self.extras_mut().crash = Some(format!(
                    "stop_child hook panicked: {}",
                    panic_message(&*panic)
                ));
                Some(DirectiveResult::Ok)
            }
        }
    }

    /// Whether a registered executor ([`DirectiveExec::holds_child`]) or
    /// the instance's child host keeps a child of this agent tagged `tag`
    /// (a panic there counts as no).
    pub(crate) fn executor_holds_child(&self, tag: &str) -> bool {
        let ctx = DirectiveContext { state: self };
        let by_exec = self.settings.executors.values().any(|exec| {
            catch_unwind(AssertUnwindSafe(|| exec.holds_child(tag, &ctx))).unwrap_or(false)
        });
        by_exec
            || self
                .jido
                .as_ref()
                .and_then(Jido::child_host)
                .is_some_and(|host| {
                    catch_unwind(AssertUnwindSafe(|| host.holds_child(tag, &ctx))).unwrap_or(false)
                })
    }

    /// The children the instance's child host keeps for this agent (a
    /// panic there counts as none).
    pub(crate) fn hosted_children(&self) -> Vec<super::ChildStatus> {
        let Some(host) = self.jido.as_ref().and_then(Jido::child_host) else {
            return Vec::new();
        };
        let ctx = DirectiveContext { state: self };
        catch_unwind(AssertUnwindSafe(|| host.children(&ctx))).unwrap_or_default()
    }

    /// Hands a SpawnAgent of a spec child to the instance's child host
    /// ([`ChildHost::spawn`](super::ChildHost::spawn)). A panic crashes the
    /// agent, as in [`DirectiveExec::exec`].
    pub(crate) fn host_spawn(
        &mut self,
        host: &dyn super::ChildHost,
        spawn: super::ChildSpawn,
    ) -> DirectiveResult {
        let ctx = DirectiveContext { state: self };
        match catch_unwind(AssertUnwindSafe(|| host.spawn(spawn, &ctx))) {
            Ok(result) => result,
            Err(panic) => {
                self.extras_mut().crash =
                    Some(format!("child host panicked: {}", panic_message(&*panic)));
                DirectiveResult::Ok
            }
        }
    }

    /// The signal of a Schedule message: a signal as is, JSON wrapped as
    /// `jido.scheduled` `{message}` from `/agent/<id>`.
    fn scheduled_signal(&self, message: ScheduledMessage) -> Signal {
        scheduled_signal_of(&self.id, message)
    }

    /// An Emit directive: as [`emit`](Self::emit), but a dispatch
    /// overflow (more than `max_concurrent_dispatches` dispatch tasks) goes
    /// to the error policy with the context `"emit"`.
    fn emit_directive(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Signal,
        signal: Signal,
        dispatch: Option<DispatchConfig>,
    ) -> DirectiveResult {
        match self.try_emit(myself, signal, dispatch) {
            Ok(result) => result,
            Err(err) => self.apply_error_policy(myself, input, &err, "emit"),
        }
    }

    /// Emit: to `dispatch`, else the default dispatch, else back to this
    /// agent's own mailbox. A dispatch overflow is logged, not handed to
    /// the error policy: the error policy's own `jido.agent.error` goes
    /// through here, and must not loop.
    pub(crate) fn emit(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Signal,
        dispatch: Option<DispatchConfig>,
    ) -> DirectiveResult {
        match self.try_emit(myself, signal, dispatch) {
            Ok(result) => result,
            Err(err) => {
                tracing::warn!(
                    target: "jido::agent_server",
                    agent_id = %self.id,
                    error = %err,
                    "emit dropped"
                );
                DirectiveResult::Ok
            }
        }
    }

    /// Delivers to the in-process targets at once, in the handler (so
    /// emitted signals arrive in order and before anything this agent does
    /// next, its exit included), and to the targets that must wait in one
    /// supervised task, within `max_concurrent_dispatches` tasks.
    ///
    /// # Errors
    ///
    /// `QueueOverflow` "emit dispatch overflow" when the task would exceed
    /// the bound; the waiting targets then get nothing.
    fn try_emit(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        signal: Signal,
        dispatch: Option<DispatchConfig>,
    ) -> Result<DirectiveResult, Error> {
        let Some(config) = dispatch.or_else(|| self.settings.default_dispatch.as_deref().cloned())
        else {
            let _ = myself.send_message(AgentMsg::from(signal));
            return Ok(DirectiveResult::Async(None));
        };
        let breakers = self.jido.as_ref().map_or_else(
            || CircuitBreakers::global().clone(),
            |j| j.circuit_breakers().clone(),
        );
        let (failed, later) = config.deliver_now_with(&signal, &breakers);
        for (index, err) in failed {
            tracing::warn!(
                target: "jido::agent_server",
                agent_id = %self.id,
                signal_type = signal.ty(),
                target_index = index,
                error = %err,
                "emit dispatch failed"
            );
        }
        if later.is_empty() {
            return Ok(DirectiveResult::Ok);
        }
        let limit = self.settings.max_concurrent_dispatches;
        let slots = Arc::clone(
            self.extras_mut()
                .dispatch_slots
                .get_or_insert_with(|| Arc::new(Semaphore::new(limit))),
        );
        let Ok(permit) = slots.try_acquire_owned() else {
            return Err(Error::queue_overflow("emit dispatch overflow")
                .with_detail("max_concurrent_dispatches", limit)
                .with_detail("signal_type", signal.ty().to_owned())
                .with_detail("signal_id", signal.id().to_owned()));
        };
        let agent_id = self.id.to_string();
        let spawned = self.exec.supervisor().spawn(async move {
            // Held until the dispatch ends (or the task is cancelled).
            let _permit = permit;
            if let Err(err) = later.dispatch_with(&signal, &breakers).await {
                tracing::warn!(
                    target: "jido::agent_server",
                    agent_id = %agent_id,
                    signal_type = signal.ty(),
                    error = %err,
                    "emit dispatch failed"
                );
            }
        });
        if let Err(err) = spawned {
            tracing::warn!(target: "jido::agent_server", agent_id = %self.id, error = %err, "emit dropped");
        }
        Ok(DirectiveResult::Async(None))
    }

    fn emit_to_parent(&mut self, signal: Signal, parent_id: &str) -> DirectiveResult {
        let target = match &self.parent {
            Some(p) if p.id == parent_id => Some(AgentRef::new(p.actor.clone(), p.id.as_str())),
            _ => self.lookup_agent(parent_id).ok(),
        };
        match target {
            Some(parent) => {
                if let Err(err) = parent.cast(signal) {
                    tracing::warn!(target: "jido::agent_server", agent_id = %self.id, parent_id, error = %err, "emit to parent failed");
                }
            }
            None => tracing::warn!(
                target: "jido::agent_server",
                agent_id = %self.id,
                parent_id,
                "emit to parent dropped: parent not found"
            ),
        }
        DirectiveResult::Async(None)
    }

    /// Applies the error policy to one error raised while processing
    /// `input`. Counts it, logs it (details sanitised, strings bounded),
    /// then does what the policy says.
    pub(crate) fn apply_error_policy(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Signal,
        error: &Error,
        context: &str,
    ) -> DirectiveResult {
        self.error_count = self.error_count.saturating_add(1);
        // What leaves the process (the log line, the error signal) is
        // bounded and redacted like the error envelope.
        let message = sanitize_str(error.message());
        let shown_context = sanitize_str(context);
        let signal_id = sanitize_str(input.id());
        let signal_type = sanitize_str(input.ty());
        let details = sanitize(&Value::Object(error.details().clone()));
        tracing::error!(
            name: "jido.agent_server.error",
            target: "jido::agent_server",
            agent_id = %self.id,
            context = &*shown_context,
            policy = self.settings.error_policy.as_deref().map_or("log_only", ErrorPolicy::name),
            error_type = error.kind().as_str(),
            signal_id = &*signal_id,
            signal_type = &*signal_type,
            details = %details,
            "agent {} [{}]: {}",
            self.id,
            shown_context,
            message
        );
        let policy = self
            .settings
            .error_policy
            .as_deref()
            .cloned()
            .unwrap_or_default();
        match policy {
            ErrorPolicy::LogOnly => DirectiveResult::Ok,
            ErrorPolicy::StopOnError => {
                DirectiveResult::Stop(StopReason::Custom(format!("agent_error: {message}")))
            }
            ErrorPolicy::EmitSignal(dispatch) => {
                if input.ty() == signal_types::AGENT_ERROR {
                    // An error while handling an error signal emits none:
                    // with a catch-all route back to this agent (or a peer
                    // doing the same) it would loop forever.
                    tracing::warn!(
                        target: "jido::agent_server",
                        agent_id = %self.id,
                        context = &*shown_context,
                        signal_id = &*signal_id,
                        "error while processing jido.agent.error: no further jido.agent.error emitted"
                    );
                    return DirectiveResult::Ok;
                }
                let data = json!({
                    "error": message,
                    "context": shown_context,
                    "agent_id": &*self.id,
                    "error_type": error.kind().as_str(),
                    "details": details,
                    "retryable": error.retryable(),
                    "signal_id": signal_id,
                    "signal_type": signal_type,
                });
                let source = format!("/agent/{}", self.id);
                let signal = Signal::builder(signal_types::AGENT_ERROR)
                    .source(source)
                    .data(data.clone())
                    .build()
                    .unwrap_or_else(|_| Signal::new(signal_types::AGENT_ERROR, data));
                self.emit(myself, signal, dispatch);
                DirectiveResult::Ok
            }
            ErrorPolicy::MaxErrors(n) => {
                if self.error_count >= n {
                    DirectiveResult::Stop(StopReason::Custom(format!(
                        "max_errors_exceeded: {}",
                        self.error_count
                    )))
                } else {
                    DirectiveResult::Ok
                }
            }
            ErrorPolicy::Custom(f) => {
                let event = ErrorEvent {
                    agent_id: &self.id,
                    error,
                    context,
                    error_count: self.error_count,
                    signal: input,
                };
                match catch_unwind(AssertUnwindSafe(|| f(&event))) {
                    Ok(Ok(ErrorDecision::Continue)) => DirectiveResult::Ok,
                    Ok(Ok(ErrorDecision::Stop(reason))) => DirectiveResult::Stop(reason),
                    Ok(Err(err)) => {
                        tracing::warn!(
                            target: "jido::agent_server",
                            agent_id = %self.id,
                            error = %sanitize_str(err.message()),
                            "error policy function returned an error; ignored"
                        );
                        DirectiveResult::Ok
                    }
                    Err(panic) => {
                        tracing::warn!(
                            target: "jido::agent_server",
                            agent_id = %self.id,
                            panic = %sanitize_str(&panic_message(&*panic)),
                            "error policy function panicked; ignored"
                        );
                        DirectiveResult::Ok
                    }
                }
            }
        }
    }

    /// RunInstruction: runs the instruction off the handler, then feeds
    /// `{status, result|reason, effects}` back through `cmd` as the
    /// strategy command `result_action`.
    fn run_instruction(
        &mut self,
        myself: &ActorRef<AgentMsg>,
        input: &Arc<Signal>,
        instruction: Instruction,
        result_action: String,
        meta: Map<String, Value>,
    ) -> DirectiveResult {
        let exec = self.exec.clone();
        let opts = CmdOptions::new()
            .exec(exec.clone())
            .signal(Arc::clone(input));
        let span = tracing::debug_span!(
            target: "jido::agent_server",
            "jido.agent_server.run_instruction",
            agent_id = %self.id,
            action = instruction.action.name(),
        );
        self.run_work(
            myself,
            Arc::clone(input),
            span,
            move |mut agent| async move {
                let result = AssertUnwindSafe(async {
                    let command =
                        instruction_feedback(&agent, instruction, &result_action, &meta, &exec)
                            .await;
                    agent.cmd(command, opts).await
                })
                .catch_unwind()
                .await
                .map_err(|p| {
                    Error::execution(format!(
                        "instruction feedback panicked: {}",
                        panic_message(&*p)
                    ))
                });
                (agent, result)
            },
        );
        DirectiveResult::Async(None)
    }
}

/// The signal a Schedule of agent `agent_id` delivers: a signal as is,
/// JSON wrapped as `jido.scheduled` `{message}` from `/agent/<id>`.
pub(crate) fn scheduled_signal_of(agent_id: &str, message: ScheduledMessage) -> Signal {
    match message {
        ScheduledMessage::Json(v) => Signal::builder(crate::directive::SCHEDULED_SIGNAL_TYPE)
            .source(format!("/agent/{agent_id}"))
            .data(json!({"message": v.clone()}))
            .build()
            .unwrap_or_else(|_| ScheduledMessage::Json(v).into_scheduled_signal()),
        other => other.into_scheduled_signal(),
    }
}
