//! Agent definition and value: new, set, validate, typed reads,
//! checkpoints, cmd normalisation, options, hooks, directives as data.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use jido::agent::{
    AGENT_ROUTE_PRIORITY, ORPHANED_FROM_KEY, PARENT_KEY, RESERVED_KEYS, RouteTarget, STRATEGY_KEY,
    STRATEGY_ROUTE_PRIORITY, SignalRoute,
};
use jido::directive::{
    ChildSpec, CustomDirective, Restart, ScheduledMessage, StopReason, error_context,
};
use jido::effect::StateOp;
use jido::prelude::*;
use jido::signal::Signal;
use jido::strategy::{Strategy, StrategyContext};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        other => panic!("not an object: {other}"),
    }
}

// ---------------------------------------------------------------- actions

#[derive(Clone, Deserialize, schemars::JsonSchema)]
struct PutParams {
    key: String,
    value: Value,
}

/// Outputs `{key: value}`.
struct Put;
impl Action for Put {
    type Params = PutParams;
    type Output = Value;
    const NAME: &'static str = "put";
    async fn run(&self, p: PutParams, _: &Context) -> jido::Result<Value> {
        Ok(json!({ p.key: p.value }))
    }
}

#[derive(Clone, Deserialize, schemars::JsonSchema)]
struct Empty {}

/// Outputs `{count: state.count + 1}`, reading the state from the context.
struct Increment;
impl Action for Increment {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "increment";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        let count = ctx
            .state()
            .and_then(|s| s.get("count"))
            .and_then(jido::state::StateValue::as_i64)
            .unwrap_or(0);
        Ok(json!({"count": count + 1}))
    }
}

/// Sleeps an hour.
struct Sleepy;
impl Action for Sleepy {
    type Params = Empty;
    type Output = ();
    const NAME: &'static str = "sleepy";
    async fn run(&self, _: Empty, _: &Context) -> jido::Result<()> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    }
}

/// Fails (retryably) and counts its calls.
struct Flaky(Arc<AtomicU32>);
impl Action for Flaky {
    type Params = Empty;
    type Output = ();
    const NAME: &'static str = "flaky";
    async fn run(&self, _: Empty, _: &Context) -> jido::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(Error::execution("flaky"))
    }
}

/// Pushes an Emit effect and a SetState effect, outputs `{emitted: true}`.
struct EmitAndSet;
impl Action for EmitAndSet {
    type Params = Empty;
    type Output = Value;
    const NAME: &'static str = "emit_and_set";
    async fn run(&self, _: Empty, ctx: &Context) -> jido::Result<Value> {
        ctx.push_effect(Directive::emit(Signal::new("done", json!({"n": 1}))));
        ctx.push_effect(StateOp::set_state(obj(json!({"via_effect": true}))));
        Ok(json!({"emitted": true}))
    }
}

// ---------------------------------------------------------------- agents

#[derive(Debug, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct CounterState {
    count: i64,
    label: String,
    config: Config,
}

#[derive(Debug, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
struct Config {
    a: i64,
    b: i64,
}

struct Counter;
impl Agent for Counter {
    const NAME: &'static str = "counter";
    const DESCRIPTION: &'static str = "Counts.";
    const CATEGORY: &'static str = "demo";
    const TAGS: &'static [&'static str] = &["test", "count"];
    const VERSION: &'static str = "1.2.0";
    type Schema = CounterState;
}

struct Plain;
impl Agent for Plain {
    const NAME: &'static str = "plain";
    type Schema = ();
}

/// An agent with configuration and hooks.
struct Hooked {
    marker: &'static str,
}
impl Agent for Hooked {
    const NAME: &'static str = "hooked";
    type Schema = ();

    fn on_before_cmd(
        &self,
        agent: &mut AgentState,
        mut commands: Vec<Command>,
    ) -> jido::Result<Vec<Command>> {
        if commands
            .iter()
            .any(|c| c.strategy_name() == Some("forbidden"))
        {
            return Err(Error::validation("forbidden command"));
        }
        agent.state_mut().insert("before", json!(self.marker));
        commands.push(Command::Run(
            Instruction::new(Put).with_params(json!({"key": "appended", "value": true})),
        ));
        Ok(commands)
    }

    fn on_after_cmd(
        &self,
        agent: &mut AgentState,
        mut directives: Vec<Directive>,
    ) -> Vec<Directive> {
        agent.state_mut().insert("after", json!(directives.len()));
        directives.push(Directive::stop());
        directives
    }
}

/// A strategy whose init writes its state and returns a directive, whose
/// tick counts and schedules, and which declares a route.
struct Recorder;
impl Strategy for Recorder {
    fn init(&self, agent: &mut AgentData, ctx: &StrategyContext) -> Vec<Directive> {
        let st = agent.strategy_state_mut();
        st.insert("module", json!("recorder"));
        st.insert("status", json!("waiting"));
        st.insert("config", json!({"opt": ctx.options().get("opt").cloned()}));
        st.insert(
            "inits",
            json!(
                st.get("inits")
                    .and_then(jido::state::StateValue::as_i64)
                    .unwrap_or(0)
                    + 1
            ),
        );
        vec![Directive::schedule(
            Duration::from_millis(10),
            json!("init"),
        )]
    }

    async fn cmd(
        &self,
        agent: &mut AgentData,
        commands: Vec<Command>,
        ctx: &StrategyContext,
    ) -> Vec<Directive> {
        agent
            .strategy_state_mut()
            .insert("seen", json!(commands.len()));
        agent
            .strategy_state_mut()
            .insert("agent_name", json!(ctx.agent_name()));
        Vec::new()
    }

    async fn tick(&self, agent: &mut AgentData, _: &StrategyContext) -> Vec<Directive> {
        let st = agent.strategy_state_mut();
        let ticks = st
            .get("ticks")
            .and_then(jido::state::StateValue::as_i64)
            .unwrap_or(0)
            + 1;
        st.insert("ticks", json!(ticks));
        st.insert(
            "status",
            json!(if ticks >= 2 { "success" } else { "running" }),
        );
        st.insert("result", json!({"ticks": ticks}));
        vec![Directive::schedule(
            Duration::from_millis(100),
            json!("tick"),
        )]
    }

    fn signal_routes(&self, _: &StrategyContext) -> Vec<SignalRoute> {
        vec![
            SignalRoute::new("recorder.tick", RouteTarget::StrategyTick),
            SignalRoute::new("recorder.cmd", RouteTarget::StrategyCmd("go".into()))
                .with_priority(70),
        ]
    }
}

struct Recorded;
impl Agent for Recorded {
    const NAME: &'static str = "recorded";
    type Schema = ();
    fn strategy(&self) -> DynStrategy {
        DynStrategy::new(Recorder).with_option("opt", 7)
    }
    fn signal_routes(&self) -> Vec<SignalRoute> {
        vec![
            SignalRoute::action("counter.increment", Increment),
            SignalRoute::new(
                "counter.put",
                RouteTarget::ActionWithParams(Put.into(), json!({"key": "k", "value": 1})),
            )
            .with_priority(-5),
        ]
    }
}

fn is_uuid_v7(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok_and(|u| u.get_version_num() == 7)
}

// ---------------------------------------------------------------- new

#[test]
fn new_uses_given_id_or_a_uuid_v7() {
    assert_eq!(
        AgentState::new(Plain, AgentOptions::new().id("p-1")).id(),
        "p-1"
    );
    let none = AgentState::new(Plain, AgentOptions::new());
    let empty = AgentState::new(Plain, AgentOptions::new().id(""));
    assert!(is_uuid_v7(none.id()), "{}", none.id());
    assert!(is_uuid_v7(empty.id()), "{}", empty.id());
    assert_ne!(none.id(), empty.id());
}

#[test]
fn new_state_is_schema_defaults_then_caller_state_shallow() {
    let agent = AgentState::new(
        Counter,
        AgentOptions::new().state(obj(json!({"count": 5, "config": {"a": 9}, "extra": "x"}))),
    );
    // `config` from the caller replaces the default object entirely.
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"count": 5, "label": "", "config": {"a": 9}, "extra": "x"})
    );
    let plain = AgentState::new(Plain, AgentOptions::new());
    assert!(plain.state().is_empty());
}

#[test]
fn metadata_and_definition_are_reachable_through_the_erased_value() {
    let agent = AgentState::new(Counter, AgentOptions::new());
    let meta = agent.metadata();
    assert_eq!(
        (
            meta.name,
            meta.description,
            meta.category,
            meta.tags,
            meta.version
        ),
        (
            "counter",
            "Counts.",
            "demo",
            &["test", "count"][..],
            "1.2.0"
        )
    );
    assert_eq!(agent.name(), "counter");
    assert!(agent.is::<Counter>());
    assert!(!agent.is::<Plain>());

    let hooked = AgentState::new(Hooked { marker: "m1" }, AgentOptions::new());
    assert_eq!(hooked.definition::<Hooked>().map(|h| h.marker), Some("m1"));
    assert!(hooked.definition::<Counter>().is_none());
    assert_eq!(agent.strategy().name(), "direct");
    let schema = agent.state_schema().unwrap();
    assert_eq!(schema["properties"]["count"]["type"], "integer");
    assert!(hooked.state_schema().is_none());
}

#[test]
fn reserved_keys_have_jido_names() {
    assert_eq!(STRATEGY_KEY, "__strategy__");
    assert_eq!(PARENT_KEY, "__parent__");
    assert_eq!(ORPHANED_FROM_KEY, "__orphaned_from__");
    assert_eq!(
        RESERVED_KEYS,
        ["__strategy__", "__parent__", "__orphaned_from__"]
    );
}

#[test]
fn strategy_init_runs_at_new_and_its_directives_are_dropped() {
    let mut agent = AgentState::new(Recorded, AgentOptions::new());
    assert_eq!(
        agent.state()[STRATEGY_KEY],
        json!({"module": "recorder", "status": "waiting", "config": {"opt": 7}, "inits": 1})
    );
    // The runtime calls init again and gets the directives.
    let directives = agent.init_strategy(CmdOptions::new());
    assert_eq!(directives.len(), 1);
    assert!(matches!(
        &directives[0],
        Directive::Schedule { delay, message: ScheduledMessage::Json(m) } if *delay == Duration::from_millis(10) && m == "init"
    ));
    assert_eq!(agent.state()[STRATEGY_KEY]["inits"], 2);
}

// ---------------------------------------------------------------- set / validate / typed reads

#[test]
fn set_deep_merges_maps_and_replaces_other_values() {
    let mut agent = AgentState::new(
        Plain,
        AgentOptions::new().state(obj(json!({
            "cfg": {"a": 1, "nested": {"x": 1, "y": 2}, "list": [1, 2]},
            "keep": true
        }))),
    );
    agent.set(obj(json!({
        "cfg": {"nested": {"y": 3}, "list": [3], "b": null},
        "new": {"z": 1}
    })));
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({
            "cfg": {"a": 1, "nested": {"x": 1, "y": 3}, "list": [3], "b": null},
            "keep": true,
            "new": {"z": 1}
        })
    );
    agent.set(obj(json!({"cfg": 5})));
    assert_eq!(agent.state()["cfg"], 5);
}

#[test]
fn validate_keeps_extra_keys_and_fills_defaults() {
    let mut agent = AgentState::new(Counter, AgentOptions::new());
    agent.state_mut().remove("label");
    agent.state_mut().insert("extra", json!(1));
    // `label` is missing: it takes the schema's `Default` value (with or
    // without `#[serde(default)]`), which is written back.
    agent.validate().unwrap();
    assert_eq!(agent.state()["label"], "");
    // A wrong value still fails, naming the field.
    agent.state_mut().insert("label", json!(5));
    let err = agent.validate().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(
        err.message(),
        "state validation failed: label: invalid type: integer `5`, expected a string"
    );
    assert_eq!(err.detail("path"), Some(&json!("label")));
    assert_eq!(err.detail("agent"), Some(&json!("counter")));

    agent.state_mut().insert("label", json!("ok"));
    agent.validate().unwrap();
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"count": 0, "config": {"a": 0, "b": 0}, "extra": 1, "label": "ok"})
    );
}

#[test]
fn validate_failure_names_nested_fields_and_leaves_state_unchanged() {
    let mut agent = AgentState::new(Counter, AgentOptions::new());
    agent.set(obj(json!({"config": {"b": "two"}})));
    let before = agent.state().clone();
    let err = agent.validate_strict().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("config.b")));
    assert!(
        err.message()
            .starts_with("state validation failed: config.b: invalid type: string \"two\"")
    );
    assert_eq!(agent.state(), &before);
}

#[test]
fn strict_validation_drops_unknown_keys_but_keeps_reserved_ones() {
    let mut agent = AgentState::new(
        Counter,
        AgentOptions::new().state(obj(json!({
            "count": 3,
            "junk": 1,
            "__parent__": {"id": "p"},
            "__orphaned_from__": {"id": "q"},
            "__other__": 1
        }))),
    );
    agent.strategy_state_mut().insert("k", json!(1));
    agent.validate_strict().unwrap();
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({
            "count": 3,
            "label": "",
            "config": {"a": 0, "b": 0},
            "__strategy__": {"k": 1},
            "__parent__": {"id": "p"},
            "__orphaned_from__": {"id": "q"}
        })
    );
}

#[test]
fn validation_without_schema_always_passes() {
    let mut agent = AgentState::new(
        Plain,
        AgentOptions::new().state(obj(json!({"anything": [1]}))),
    );
    agent.validate().unwrap();
    agent.validate_strict().unwrap();
    assert_eq!(agent.state()["anything"], json!([1]));
}

#[test]
fn state_as_reads_typed_state_and_names_the_failing_field() {
    let mut agent = AgentState::new(Counter, AgentOptions::new());
    agent.set(obj(json!({"count": 4, "config": {"a": 1}})));
    assert_eq!(
        agent.state_as::<CounterState>().unwrap(),
        CounterState {
            count: 4,
            label: String::new(),
            config: Config { a: 1, b: 0 }
        }
    );
    agent.set(obj(json!({"count": "four"})));
    let err = agent.state_as::<CounterState>().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.detail("path"), Some(&json!("count")));
}

// ---------------------------------------------------------------- checkpoint / restore

#[test]
fn checkpoint_has_version_agent_id_and_state() {
    let mut agent = AgentState::new(Counter, AgentOptions::new().id("c-9"));
    agent.set(obj(json!({"count": 2})));
    assert_eq!(
        agent.checkpoint(),
        json!({
            "version": "1.2.0",
            "agent": "counter",
            "id": "c-9",
            "state": {"count": 2, "label": "", "config": {"a": 0, "b": 0}}
        })
    );
}

#[test]
fn restore_round_trips_and_keeps_strategy_state() {
    let mut agent = AgentState::new(Recorded, AgentOptions::new().id("r1"));
    agent.strategy_state_mut().insert("ticks", json!(5));
    agent.state_mut().insert("x", json!({"y": 1}));
    let saved = agent.checkpoint();
    let back = AgentState::restore(Recorded, &saved).unwrap();
    assert_eq!(back.id(), "r1");
    assert_eq!(back.state(), agent.state());
    assert_eq!(back.checkpoint(), saved);
}

#[test]
fn restore_refuses_another_agent_or_version_or_shape() {
    let saved = AgentState::new(Counter, AgentOptions::new().id("c")).checkpoint();

    let err = AgentState::restore(Plain, &saved).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "checkpoint is for another agent");
    assert_eq!(err.detail("expected"), Some(&json!("plain")));
    assert_eq!(err.detail("got"), Some(&json!("counter")));

    let mut old = saved.clone();
    old["version"] = json!("1.1.0");
    let err = AgentState::restore(Counter, &old).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(err.message(), "checkpoint version mismatch");
    assert_eq!(err.detail("expected"), Some(&json!("1.2.0")));
    assert_eq!(err.detail("got"), Some(&json!("1.1.0")));

    let mut broken = saved.clone();
    broken["state"] = json!([1]);
    let err = AgentState::restore(Counter, &broken).unwrap_err();
    assert_eq!(err.message(), "invalid checkpoint");
    assert_eq!(err.detail("reason"), Some(&json!("missing state object")));

    let err = AgentState::restore(Counter, &json!("nope")).unwrap_err();
    assert_eq!(err.detail("reason"), Some(&json!("expected a JSON object")));
}

// ---------------------------------------------------------------- cmd: input shapes and normalisation

#[tokio::test]
async fn cmd_accepts_every_input_shape() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let opts = ExecOptions::new;

    assert!(agent.cmd(Increment, opts()).await.is_empty());
    assert!(
        agent
            .cmd((Put, json!({"key": "a", "value": 1})), opts())
            .await
            .is_empty()
    );
    assert!(
        agent
            .cmd(Instruction::new(Increment), opts())
            .await
            .is_empty()
    );
    assert!(
        agent
            .cmd(
                vec![Instruction::new(Increment), Instruction::new(Increment)],
                opts()
            )
            .await
            .is_empty()
    );
    assert!(agent.cmd(Command::run(Increment), opts()).await.is_empty());
    assert!(
        agent
            .cmd(
                vec![
                    Command::run(Increment),
                    Instruction::new(Put)
                        .with_params(json!({"key": "b", "value": 2}))
                        .into()
                ],
                opts()
            )
            .await
            .is_empty()
    );
    let allowed = [DynAction::new(Increment)];
    assert!(
        agent
            .cmd(
                Instruction::from_json(&json!(["increment"]), &allowed),
                opts()
            )
            .await
            .is_empty()
    );
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"count": 7, "a": 1, "b": 2})
    );
}

#[tokio::test]
async fn normalisation_failure_leaves_the_agent_unchanged_with_one_error() {
    let mut agent = AgentState::new(Plain, AgentOptions::new().state(obj(json!({"n": 1}))));
    let before = agent.state().clone();

    let allowed = [DynAction::new(Increment)];
    let directives = agent
        .cmd(
            Instruction::from_json(&json!("nope"), &allowed),
            ExecOptions::new(),
        )
        .await;
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, context } = &directives[0] else {
        panic!("{directives:?}")
    };
    assert_eq!(context, error_context::NORMALIZE);
    assert_eq!(error.kind(), ErrorKind::Validation);
    assert_eq!(error.message(), "invalid action");
    assert_eq!(
        error.detail("reason"),
        Some(&json!({
            "type": "configuration_error",
            "message": "actions not allowed: nope",
            "details": {"action": "nope"},
            "retryable": false
        }))
    );
    assert_eq!(agent.state(), &before);

    // Params that are not an object fail the whole list before anything runs.
    let directives = agent
        .cmd(
            vec![
                Instruction::new(Increment),
                Instruction::new(Put).with_params(json!(5)),
            ],
            ExecOptions::new(),
        )
        .await;
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, context } = &directives[0] else {
        panic!("{directives:?}")
    };
    assert_eq!(context, "normalize");
    assert_eq!(
        error.detail("reason").unwrap()["message"],
        "invalid params format: expected a JSON object, got a number"
    );
    assert_eq!(
        error.detail("reason").unwrap()["details"],
        json!({"action": "put", "index": 1})
    );
    assert_eq!(agent.state(), &before);
}

#[tokio::test]
async fn null_params_read_as_empty_object() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent
        .cmd((Increment, Value::Null), ExecOptions::new())
        .await;
    assert!(directives.is_empty(), "{directives:?}");
    assert_eq!(agent.state()["count"], 1);
}

// ---------------------------------------------------------------- cmd: options, context, results

#[tokio::test(start_paused = true)]
async fn cmd_options_apply_to_every_instruction_and_win() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let own = ExecOptions::new()
        .timeout(Duration::from_secs(7200))
        .max_retries(0);
    let directives = agent
        .cmd(
            vec![
                Instruction::new(Sleepy).with_opts(own),
                Instruction::new(Sleepy),
            ],
            ExecOptions::new()
                .timeout(Duration::from_secs(1))
                .max_retries(0),
        )
        .await;
    assert_eq!(directives.len(), 2);
    for d in &directives {
        let Directive::Error { error, context } = d else {
            panic!("{d:?}")
        };
        assert_eq!(context, "instruction");
        let reason = error.detail("reason").unwrap();
        assert_eq!(reason["type"], "timeout");
        assert_eq!(reason["message"], "action sleepy timed out after 1000ms");
    }
}

#[tokio::test(start_paused = true)]
async fn unset_cmd_options_keep_the_instructions_own() {
    let calls = Arc::new(AtomicU32::new(0));
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let own = ExecOptions::new()
        .max_retries(2)
        .backoff(Duration::from_millis(1));
    let directives = agent
        .cmd(
            Instruction::new(Flaky(calls.clone())).with_opts(own),
            ExecOptions::new().timeout(Duration::from_secs(5)),
        )
        .await;
    assert_eq!(directives.len(), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 3);

    // And the cmd's retry count wins over the instruction's.
    calls.store(0, Ordering::SeqCst);
    agent
        .cmd(
            Instruction::new(Flaky(calls.clone())).with_opts(own),
            ExecOptions::new().max_retries(0),
        )
        .await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn actions_see_the_state_as_of_their_turn() {
    let mut agent = AgentState::new(Plain, AgentOptions::new().state(obj(json!({"count": 10}))));
    let directives = agent
        .cmd(vec![Increment, Increment, Increment], ExecOptions::new())
        .await;
    assert!(directives.is_empty());
    assert_eq!(agent.state()["count"], 13);
}

#[tokio::test]
async fn output_merges_effects_apply_and_directives_come_back() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let directives = agent.cmd(EmitAndSet, ExecOptions::new()).await;
    assert_eq!(directives.len(), 1);
    let Directive::Emit { signal, dispatch } = &directives[0] else {
        panic!("{directives:?}")
    };
    assert_eq!(signal.ty(), "done");
    assert_eq!(signal.data(), Some(&json!({"n": 1})));
    assert!(dispatch.is_none());
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"emitted": true, "via_effect": true})
    );
}

#[tokio::test]
async fn cmd_runs_on_a_given_executor_and_future_is_send() {
    let exec = jido::exec::Exec::new();
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let handle = tokio::spawn(async move {
        let d = agent
            .cmd(
                Increment,
                CmdOptions::new()
                    .exec(exec)
                    .signal(Signal::new("x", json!({}))),
            )
            .await;
        (agent, d)
    });
    let (agent, d) = handle.await.unwrap();
    assert!(d.is_empty());
    assert_eq!(agent.state()["count"], 1);
}

// ---------------------------------------------------------------- hooks

#[tokio::test]
async fn hooks_rewrite_commands_and_directives() {
    let mut agent = AgentState::new(Hooked { marker: "hm" }, AgentOptions::new());
    let directives = agent.cmd(Increment, ExecOptions::new()).await;
    assert_eq!(directives.len(), 1);
    assert!(matches!(
        &directives[0],
        Directive::Stop {
            reason: StopReason::Normal
        }
    ));
    assert_eq!(
        Value::Object(agent.state().to_json()),
        json!({"before": "hm", "count": 1, "appended": true, "after": 0})
    );
}

#[tokio::test]
async fn a_failing_before_hook_ends_cmd_with_one_error() {
    let mut agent = AgentState::new(Hooked { marker: "hm" }, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![
                Command::run(Increment),
                Command::strategy("forbidden", json!({})),
            ],
            ExecOptions::new(),
        )
        .await;
    assert_eq!(directives.len(), 1);
    let Directive::Error { error, context } = &directives[0] else {
        panic!("{directives:?}")
    };
    assert_eq!(context, error_context::ON_BEFORE_CMD);
    assert_eq!(error.message(), "forbidden command");
    assert!(agent.state().is_empty());
}

// ---------------------------------------------------------------- strategy plumbing

#[tokio::test]
async fn strategy_context_carries_options_and_agent_name() {
    let mut agent = AgentState::new(Recorded, AgentOptions::new());
    let directives = agent
        .cmd(
            vec![Command::run(Increment), Command::strategy("go", json!({}))],
            ExecOptions::new(),
        )
        .await;
    assert!(directives.is_empty());
    assert_eq!(agent.state()[STRATEGY_KEY]["seen"], 2);
    assert_eq!(agent.state()[STRATEGY_KEY]["agent_name"], "recorded");
    let ctx = agent.strategy_context(&CmdOptions::new());
    assert_eq!(ctx.options().get("opt"), Some(&json!(7)));
    assert_eq!(ctx.agent_name(), "recorded");
}

#[tokio::test]
async fn default_snapshot_reads_status_result_and_details() {
    let mut agent = AgentState::new(Recorded, AgentOptions::new());
    let snap = agent.strategy_snapshot();
    assert_eq!(snap.status, SnapshotStatus::Waiting);
    assert!(!snap.done);
    assert!(snap.is_running());
    assert_eq!(snap.result, None);
    assert_eq!(Value::Object(snap.details), json!({"inits": 1}));

    let d = agent.tick(ExecOptions::new()).await;
    assert!(matches!(&d[..], [Directive::Schedule { .. }]));
    let snap = agent.strategy_snapshot();
    assert_eq!(snap.status, SnapshotStatus::Running);
    assert_eq!(snap.result, Some(json!({"ticks": 1})));
    assert_eq!(Value::Object(snap.details), json!({"inits": 1, "ticks": 1}));

    agent.tick(ExecOptions::new()).await;
    let snap = agent.strategy_snapshot();
    assert_eq!(snap.status, SnapshotStatus::Success);
    assert!(snap.done);
    assert!(!snap.is_running());

    let plain = AgentState::new(Plain, AgentOptions::new());
    assert_eq!(plain.strategy_snapshot(), Snapshot::default());
    assert_eq!(Snapshot::default().status, SnapshotStatus::Idle);
}

#[test]
fn routes_come_from_strategy_then_agent_with_default_priorities() {
    let agent = AgentState::new(Recorded, AgentOptions::new());
    let routes = agent.signal_routes();
    let summary: Vec<(&str, Option<i32>)> = routes
        .iter()
        .map(|r| (r.path.as_str(), r.priority))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("recorder.tick", Some(STRATEGY_ROUTE_PRIORITY)),
            ("recorder.cmd", Some(70)),
            ("counter.increment", Some(AGENT_ROUTE_PRIORITY)),
            ("counter.put", Some(-5)),
        ]
    );
    assert!(matches!(routes[0].target, RouteTarget::StrategyTick));
    assert!(matches!(&routes[1].target, RouteTarget::StrategyCmd(c) if c == "go"));
    assert!(matches!(&routes[2].target, RouteTarget::Action(a) if a.name() == "increment"));
    assert!(
        matches!(&routes[3].target, RouteTarget::ActionWithParams(a, p) if a.name() == "put" && p["key"] == "k")
    );
}

#[test]
fn strategy_ext_is_typed_copy_on_write_and_not_checkpointed() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    assert!(agent.strategy_ext::<Vec<u32>>().is_none());
    agent.set_strategy_ext(vec![1u32, 2]);
    let copy = agent.clone();
    agent.strategy_ext_mut::<Vec<u32>>().unwrap().push(3);
    assert_eq!(agent.strategy_ext::<Vec<u32>>(), Some(&vec![1, 2, 3]));
    assert_eq!(copy.strategy_ext::<Vec<u32>>(), Some(&vec![1, 2]));
    assert!(agent.strategy_ext::<String>().is_none());
    assert!(agent.strategy_ext_mut::<String>().is_none());
    assert_eq!(agent.checkpoint()["state"], json!({}));
    agent.clear_strategy_ext();
    assert!(agent.strategy_ext::<Vec<u32>>().is_none());
}

#[test]
fn clones_share_state_until_one_changes() {
    let mut a = AgentState::new(Plain, AgentOptions::new().state(obj(json!({"n": 1}))));
    let b = a.clone();
    assert!(a.state().ptr_eq(b.state()));
    a.set(obj(json!({"n": 2})));
    assert!(!a.state().ptr_eq(b.state()));
    assert_eq!(
        (a.state()["n"].to_json(), b.state()["n"].to_json()),
        (json!(2), json!(1))
    );
}

// ---------------------------------------------------------------- directives as data

#[test]
fn emit_to_parent_needs_a_live_parent() {
    let mut agent = AgentState::new(Plain, AgentOptions::new());
    let sig = || Signal::new("child.done", json!({"ok": true}));
    assert!(Directive::emit_to_parent(&agent, sig()).is_none());
    assert_eq!(agent.parent_id(), None);

    agent.set(obj(
        json!({"__parent__": {"id": "boss", "tag": "w1", "meta": {}}}),
    ));
    assert_eq!(agent.parent_id(), Some("boss"));
    let d = Directive::emit_to_parent(&agent, sig()).unwrap();
    let Directive::EmitToParent { signal, parent_id } = &d else {
        panic!("{d:?}")
    };
    assert_eq!((signal.ty(), parent_id.as_str()), ("child.done", "boss"));

    // Orphaned: the parent entry is gone, the former parent recorded.
    let mut orphan = agent.clone();
    orphan.apply_state_op(StateOp::delete_keys([PARENT_KEY]));
    orphan.set(obj(
        json!({"__orphaned_from__": {"id": "boss", "tag": "w1"}}),
    ));
    assert!(Directive::emit_to_parent(&orphan, sig()).is_none());

    agent.set(obj(json!({"__parent__": null})));
    assert!(Directive::emit_to_parent(&agent, sig()).is_none());
}

#[test]
fn constructors_give_jido_defaults() {
    let d: Directive = Directive::spawn_agent(
        AgentState::new(Counter, AgentOptions::new().id("kid")),
        "worker",
    )
    .into();
    let Directive::SpawnAgent {
        agent,
        tag,
        options,
        meta,
        restart,
    } = &d
    else {
        panic!()
    };
    assert!(agent.is::<Counter>());
    assert_eq!(
        (agent.id(), tag.as_str(), *restart),
        ("kid", "worker", Restart::Transient)
    );
    assert!(meta.is_empty());
    assert_eq!(
        (options.get_id(), options.get_on_parent_death()),
        (None, None)
    );
    assert_eq!(Restart::default(), Restart::Transient);

    let Directive::Cron {
        cron,
        message,
        job_id,
        timezone,
    } = Directive::cron("*/5 * * * *", json!({"k": 1})).into()
    else {
        panic!()
    };
    assert_eq!(
        (cron.as_str(), timezone.as_str()),
        ("*/5 * * * *", "Etc/UTC")
    );
    assert!(is_uuid_v7(&job_id));
    let tick = message.to_cron_signal(&job_id);
    assert_eq!(tick.ty(), "jido.cron_tick");
    assert_eq!(
        tick.data(),
        Some(&json!({"job_id": job_id, "message": {"k": 1}}))
    );

    let Directive::Schedule { delay, message } =
        Directive::schedule(Duration::from_millis(250), json!("ping"))
    else {
        panic!()
    };
    assert_eq!(delay, Duration::from_millis(250));
    let s = message.into_scheduled_signal();
    assert_eq!(
        (s.ty(), s.data()),
        ("jido.scheduled", Some(&json!({"message": "ping"})))
    );
    let own = Signal::new("own.type", json!({}));
    let Directive::Schedule { message, .. } = Directive::schedule(Duration::ZERO, own.clone())
    else {
        panic!()
    };
    assert_eq!(message, ScheduledMessage::Signal(own.clone()));
    assert_eq!(message.into_scheduled_signal().id(), own.id());

    let Directive::RunInstruction {
        instruction,
        result_action,
        meta,
    } = Directive::run_instruction(Instruction::new(Increment)).into()
    else {
        panic!()
    };
    assert_eq!(
        (instruction.action.name(), result_action.as_str()),
        ("increment", "instruction_result")
    );
    assert!(meta.is_empty());

    assert!(matches!(
        Directive::stop(),
        Directive::Stop {
            reason: StopReason::Normal
        }
    ));
    assert!(
        matches!(Directive::stop_with("quota"), Directive::Stop { reason: StopReason::Custom(r) } if r == "quota")
    );
    assert!(
        matches!(Directive::stop_child("w"), Directive::StopChild { tag, reason: StopReason::Normal } if tag == "w")
    );
    assert!(
        matches!(Directive::adopt_child("c-1", "w"), Directive::AdoptChild { child, tag, meta } if child == "c-1" && tag == "w" && meta.is_empty())
    );
    assert!(
        matches!(Directive::cron_cancel("j"), Directive::CronCancel { job_id } if job_id == "j")
    );
    assert!(
        matches!(Directive::error(Error::internal("x"), "routing"), Directive::Error { context, .. } if context == "routing")
    );
    let to = Directive::emit_to(
        Signal::new("a", json!({})),
        jido::signal::dispatch::DispatchConfig::default(),
    );
    assert!(matches!(
        to,
        Directive::Emit {
            dispatch: Some(_),
            ..
        }
    ));
    assert_eq!(
        Directive::emit(Signal::new("a", Value::Null)).kind(),
        "emit"
    );
}

#[test]
fn stop_reasons_convert_and_serialise_as_strings() {
    assert_eq!(StopReason::default(), StopReason::Normal);
    assert_eq!(StopReason::from("shutdown"), StopReason::Shutdown);
    assert_eq!(StopReason::from(String::from("normal")), StopReason::Normal);
    assert_eq!(
        serde_json::to_value(StopReason::Custom("x".into())).unwrap(),
        json!("x")
    );
    assert_eq!(
        serde_json::from_value::<StopReason>(json!("shutdown")).unwrap(),
        StopReason::Shutdown
    );
    assert!(!StopReason::from("boom").is_clean());
    assert_eq!(
        serde_json::to_value(Restart::Temporary).unwrap(),
        json!("temporary")
    );
}

#[tokio::test]
async fn spawn_child_spec_runs_its_factory_each_time() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let spec = ChildSpec::new("counter_task", move || {
        let c = c.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let Directive::Spawn { child, tag } = Directive::spawn(spec) else {
        panic!()
    };
    assert_eq!((child.name(), tag), ("counter_task", None));
    let copy = child.clone();
    child.start().await.unwrap();
    copy.start().await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(format!("{child:?}").contains("counter_task"));
}

#[derive(Debug, PartialEq)]
struct Page {
    who: String,
}
impl CustomDirective for Page {
    fn type_name(&self) -> &'static str {
        "page"
    }
}

#[derive(Debug)]
struct Other;
impl CustomDirective for Other {}

#[test]
fn custom_directives_downcast_and_clone() {
    let d = Directive::custom(Page { who: "ops".into() });
    assert_eq!(d.kind(), "page");
    let copy = d.clone();
    let Directive::Custom(c) = copy else { panic!() };
    assert!(c.is::<Page>());
    assert_eq!(c.downcast_ref::<Page>(), Some(&Page { who: "ops".into() }));
    assert!(c.downcast_ref::<Other>().is_none());
    assert!(!c.is::<Other>());
}

#[test]
fn public_values_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<AgentState>();
    assert_send_sync::<Directive>();
    assert_send_sync::<Command>();
    assert_send_sync::<DynStrategy>();
    assert_send_sync::<StrategyContext>();
    assert_send_sync::<CmdOptions>();
    assert_send_sync::<Snapshot>();
}

#[tokio::test]
async fn cmd_checks_its_input_and_runs_on_before_cmd_when_called() {
    let mut agent = AgentState::new(Hooked { marker: "m" }, AgentOptions::new());
    let put = || Instruction::new(Put).with_params(json!({"key": "k", "value": 1}));
    // Called, never polled: the hook ran, the strategy and on_after_cmd did not.
    drop(agent.cmd(put(), ExecOptions::new()));
    assert_eq!(
        agent
            .state()
            .get("before")
            .map(jido::state::StateValue::to_json),
        Some(json!("m"))
    );
    assert_eq!(agent.state().get("k"), None);
    assert_eq!(agent.state().get("appended"), None);
    assert_eq!(agent.state().get("after"), None);
    // Awaited: everything ran.
    let directives = agent.cmd(put(), ExecOptions::new()).await;
    assert_eq!(directives.len(), 1);
    assert_eq!(
        agent.state().get("k").map(jido::state::StateValue::to_json),
        Some(json!(1))
    );
    assert_eq!(
        agent
            .state()
            .get("appended")
            .map(jido::state::StateValue::to_json),
        Some(json!(true))
    );
    assert_eq!(
        agent
            .state()
            .get("after")
            .map(jido::state::StateValue::to_json),
        Some(json!(0))
    );
}
