//! Adaptive: score each new question and delegate it to the strategy that
//! suits it (Jido's `Adaptive.Selection` rules).
//!
//! [`select`] reads the question:
//!
//! * its *task type*, first match wins: puzzle / iterate / improve /
//!   refine / recursive / riddle → `iterative_reasoning` (TRM, else ToT);
//!   synthesize / combine / merge / integrate / aggregate / unify /
//!   consolidate, or relationships / connections / network / graph /
//!   linked / interdependent / perspectives / viewpoints → `synthesis`
//!   (GoT, else ToT); search / find / lookup / fetch / get / calculate /
//!   compute / call / execute / run / use / tool → `tool_use` (ReAct);
//!   analyze / explore / consider / multiple / options / alternatives /
//!   compare / contrast / evaluate → `exploration` (AoT, else ToT, else
//!   GoT); what is / who / when / where / define / explain / tell me →
//!   `simple_query`; else `general`;
//! * its *complexity* in `[0, 1]`: 0.3 × min(words / 100, 1) + 0.2 ×
//!   min(sentences / 5, 1) + 0.3 × min(complex keywords / 3, 1) + 0.2 ×
//!   min((question marks + must / should / need to / have to / require) /
//!   5, 1).
//!
//! The task type picks the strategy when it names one that is available;
//! else the complexity does: below [`AdaptiveConfig::simple_threshold`]
//! (0.3) → CoD (else CoT), above
//! [`AdaptiveConfig::complex_threshold`] (0.7) → AoT (else ToT, else GoT),
//! between → ReAct; the first available strategy when none of those is;
//! ReAct as the last resort. Available by default: CoD, CoT, ReAct, ToT,
//! GoT, TRM (AoT only when added). [`AdaptiveConfig::strategy_override`]
//! skips the analysis (complexity reported as 0.5, task type
//! `manual_override`).
//!
//! Every accepted request is selected afresh and runs on a new machine of
//! the chosen strategy; the phases, steps and outcome are that machine's
//! (ReAct's `awaiting_llm` / `awaiting_tool` included).

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use super::aot::{Aot, AotConfig};
use super::cot::{Cot, CotConfig};
use super::got::{Got, GotConfig};
use super::machine::{Event, LlmCall, Machine, Phase, Run, Step, Termination, Transition, busy};
use super::tot::{Tot, TotConfig};
use super::trm::{Trm, TrmConfig};
use crate::ai::react::machine as react;
use crate::state::{StateMap, StateValue};

/// A strategy Adaptive can delegate to.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    /// Chain of Draft.
    Cod,
    /// Chain of Thought.
    Cot,
    /// ReAct.
    React,
    /// Algorithm of Thoughts.
    Aot,
    /// Tree of Thoughts.
    Tot,
    /// Graph of Thoughts.
    Got,
    /// TRM.
    Trm,
}

impl Choice {
    /// The strategy's short name (`"cod"`, `"react"`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Choice::Cod => "cod",
            Choice::Cot => "cot",
            Choice::React => "react",
            Choice::Aot => "aot",
            Choice::Tot => "tot",
            Choice::Got => "got",
            Choice::Trm => "trm",
        }
    }
}

/// What the question looks like.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    /// Puzzles, iteration, refinement.
    IterativeReasoning,
    /// Combining perspectives.
    Synthesis,
    /// Looking things up, computing.
    ToolUse,
    /// Comparing options.
    Exploration,
    /// A plain question.
    SimpleQuery,
    /// Anything else.
    General,
    /// Chosen by [`AdaptiveConfig::strategy_override`].
    ManualOverride,
}

/// Which strategy a question got, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// The strategy.
    pub strategy: Choice,
    /// The question's complexity.
    pub complexity: f64,
    /// Its task type.
    pub task_type: TaskType,
    /// `"automatic"` or `"override"`.
    pub source: String,
}

/// The configuration of [`Adaptive`]: the selection rules and each
/// delegate's configuration.
#[derive(Clone, Debug)]
pub struct AdaptiveConfig {
    /// The strategies it may pick (CoD, CoT, ReAct, ToT, GoT, TRM).
    pub available: Vec<Choice>,
    /// Below this complexity a question is simple (0.3).
    pub simple_threshold: f64,
    /// Above this complexity a question is complex (0.7).
    pub complex_threshold: f64,
    /// Always this strategy (none).
    pub strategy_override: Option<Choice>,
    /// Chain of Thought's configuration.
    pub cot: CotConfig,
    /// Chain of Draft's configuration.
    pub cod: CotConfig,
    /// Algorithm of Thoughts' configuration.
    pub aot: AotConfig,
    /// Tree of Thoughts' configuration.
    pub tot: TotConfig,
    /// Graph of Thoughts' configuration.
    pub got: GotConfig,
    /// TRM's configuration.
    pub trm: TrmConfig,
    /// ReAct's configuration.
    pub react: react::MachineConfig,
    /// ReAct's system prompt.
    pub react_system_prompt: Option<String>,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            available: vec![
                Choice::Cod,
                Choice::Cot,
                Choice::React,
                Choice::Tot,
                Choice::Got,
                Choice::Trm,
            ],
            simple_threshold: 0.3,
            complex_threshold: 0.7,
            strategy_override: None,
            cot: CotConfig::thought(),
            cod: CotConfig::draft(),
            aot: AotConfig::default(),
            tot: TotConfig::default(),
            got: GotConfig::default(),
            trm: TrmConfig::default(),
            react: react::MachineConfig::new(),
            react_system_prompt: None,
        }
    }
}

const TOOL_WORDS: [&str; 13] = [
    "search",
    "find",
    "lookup",
    "fetch",
    "get",
    "calculate",
    "compute",
    "call",
    "execute",
    "run",
    "use",
    "tool",
    "look up",
];
const COMPLEX_WORDS: [&str; 9] = [
    "analyze",
    "explore",
    "consider",
    "multiple",
    "options",
    "alternatives",
    "compare",
    "contrast",
    "evaluate",
];
const SIMPLE_WORDS: [&str; 7] = [
    "what is", "who", "when", "where", "define", "explain", "tell me",
];
const SYNTHESIS_WORDS: [&str; 15] = [
    "synthesize",
    "combine",
    "merge",
    "integrate",
    "aggregate",
    "unify",
    "consolidate",
    "relationships",
    "connections",
    "network",
    "graph",
    "linked",
    "interdependent",
    "perspectives",
    "viewpoints",
];
const PUZZLE_WORDS: [&str; 6] = [
    "puzzle",
    "iterate",
    "improve",
    "refine",
    "recursive",
    "riddle",
];
const CONSTRAINT_WORDS: [&str; 5] = ["must", "should", "need to", "have to", "require"];

/// The complexity of a question (see the module docs).
pub fn complexity(prompt: &str) -> f64 {
    let lower = prompt.to_lowercase();
    let words = lower.split_whitespace().count() as f64;
    let length = (words / 100.0).min(1.0) * 0.3;
    let sentences = prompt.split(['.', '!', '?']).count().saturating_sub(1) as f64;
    let structure = (sentences / 5.0).min(1.0) * 0.2;
    let complex = COMPLEX_WORDS.iter().filter(|w| lower.contains(*w)).count() as f64;
    let keywords = (complex / 3.0).min(1.0) * 0.3;
    let questions = prompt.matches('?').count();
    let constraints: usize = CONSTRAINT_WORDS
        .iter()
        .map(|w| lower.matches(w).count())
        .sum();
    let constraint = ((questions + constraints) as f64 / 5.0).min(1.0) * 0.2;
    (length + structure + keywords + constraint).min(1.0)
}

/// The task type of a question (see the module docs).
pub fn task_type(prompt: &str) -> TaskType {
    let lower = prompt.to_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    if any(&PUZZLE_WORDS) {
        TaskType::IterativeReasoning
    } else if any(&SYNTHESIS_WORDS) {
        TaskType::Synthesis
    } else if any(&TOOL_WORDS) {
        TaskType::ToolUse
    } else if any(&COMPLEX_WORDS) {
        TaskType::Exploration
    } else if any(&SIMPLE_WORDS) {
        TaskType::SimpleQuery
    } else {
        TaskType::General
    }
}

/// Picks the strategy for `prompt` (see the module docs).
///
/// ```
/// use jido::ai::reasoning::adaptive::{select, AdaptiveConfig, Choice, TaskType};
///
/// let cfg = AdaptiveConfig::default();
/// assert_eq!(select("Synthesize these viewpoints", &cfg).strategy, Choice::Got);
/// assert_eq!(select("Calculate 6 times 7", &cfg).strategy, Choice::React);
/// assert_eq!(select("Compare the options", &cfg).strategy, Choice::Tot);
/// assert_eq!(select("Refine this haiku", &cfg).strategy, Choice::Trm);
/// let s = select("What is 2+2?", &cfg);
/// assert_eq!((s.strategy, s.task_type), (Choice::Cod, TaskType::SimpleQuery));
/// ```
pub fn select(prompt: &str, config: &AdaptiveConfig) -> Selection {
    if let Some(strategy) = config.strategy_override {
        return Selection {
            strategy,
            complexity: 0.5,
            task_type: TaskType::ManualOverride,
            source: "override".into(),
        };
    }
    let available = &config.available;
    let first = |prefs: &[Choice]| prefs.iter().copied().find(|p| available.contains(p));
    let score = complexity(prompt);
    let task = task_type(prompt);
    let by_task = match task {
        TaskType::ToolUse => first(&[Choice::React]),
        TaskType::Synthesis => first(&[Choice::Got, Choice::Tot]),
        TaskType::Exploration => first(&[Choice::Aot, Choice::Tot, Choice::Got]),
        TaskType::IterativeReasoning => first(&[Choice::Trm, Choice::Tot]),
        _ => None,
    };
    let strategy = by_task
        .or_else(|| {
            if score < config.simple_threshold {
                first(&[Choice::Cod, Choice::Cot])
            } else if score > config.complex_threshold {
                first(&[Choice::Aot, Choice::Tot, Choice::Got])
            } else {
                first(&[Choice::React])
            }
            .or_else(|| available.first().copied())
        })
        .unwrap_or(Choice::React);
    Selection {
        strategy,
        complexity: score,
        task_type: task,
        source: "automatic".into(),
    }
}

/// ReAct's machine, kept in JSON through its own `write` / `read`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReactMachine(pub react::Machine);

impl Serialize for ReactMachine {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = StateMap::new();
        self.0.write(&mut map);
        Value::Object(map.to_json()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ReactMachine {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let map = match StateValue::from(value) {
            StateValue::Object(m) => m,
            _ => StateMap::new(),
        };
        Ok(ReactMachine(react::Machine::read(&map).unwrap_or_default()))
    }
}

/// The delegate running the current request.
#[non_exhaustive]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "strategy", content = "machine", rename_all = "snake_case")]
pub enum Delegate {
    /// No request yet.
    #[default]
    None,
    /// Chain of Draft.
    Cod(Cot),
    /// Chain of Thought.
    Cot(Cot),
    /// ReAct.
    React(ReactMachine),
    /// Algorithm of Thoughts.
    Aot(Aot),
    /// Tree of Thoughts.
    Tot(Tot),
    /// Graph of Thoughts.
    Got(Got),
    /// TRM.
    Trm(Trm),
}

/// The Adaptive machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Adaptive {
    /// The request bookkeeping, mirrored from the delegate.
    pub run: Run,
    /// The last selection.
    pub selection: Option<Selection>,
    /// The delegate.
    pub delegate: Delegate,
}

fn react_phase(status: react::Status) -> Phase {
    match status {
        react::Status::Idle => Phase::Idle,
        react::Status::AwaitingLlm => Phase::AwaitingLlm,
        react::Status::AwaitingTool => Phase::AwaitingTool,
        react::Status::Completed => Phase::Completed,
        _ => Phase::Error,
    }
}

fn react_termination(t: react::Termination) -> Termination {
    match t {
        react::Termination::FinalAnswer => Termination::FinalAnswer,
        react::Termination::MaxIterations => Termination::MaxIterations,
        react::Termination::Cancelled => Termination::Cancelled,
        _ => Termination::Error,
    }
}

impl Adaptive {
    fn delegate_event(&mut self, config: &AdaptiveConfig, event: Event) -> Transition {
        let t = match &mut self.delegate {
            Delegate::None => return Transition::ignored(),
            Delegate::Cod(m) => m.handle(&config.cod, event),
            Delegate::Cot(m) => m.handle(&config.cot, event),
            Delegate::Aot(m) => m.handle(&config.aot, event),
            Delegate::Tot(m) => m.handle(&config.tot, event),
            Delegate::Got(m) => m.handle(&config.got, event),
            Delegate::Trm(m) => m.handle(&config.trm, event),
            Delegate::React(m) => {
                let event = match event {
                    Event::Start { request_id, query } => react::Event::Start {
                        request_id,
                        query,
                        output: None,
                    },
                    Event::LlmDelta { call_id } => react::Event::LlmDelta { call_id },
                    Event::LlmResult { call_id, result } => {
                        react::Event::LlmResult { call_id, result }
                    }
                    Event::ToolResult { call_id, result } => {
                        react::Event::ToolResult { call_id, result }
                    }
                    Event::Cancel { request_id, reason } => {
                        react::Event::Cancel { request_id, reason }
                    }
                };
                let t = m.0.handle(&config.react, event);
                let steps = t
                    .steps
                    .into_iter()
                    .filter_map(|s| lift_react(&m.0, config, s))
                    .collect();
                Transition {
                    accepted: t.accepted,
                    steps,
                }
            }
        };
        self.sync();
        t
    }

    /// Mirrors the delegate's bookkeeping into [`Adaptive::run`].
    fn sync(&mut self) {
        let inner = match &self.delegate {
            Delegate::None => return,
            Delegate::Cod(m) | Delegate::Cot(m) => m.run.clone(),
            Delegate::Aot(m) => m.run.clone(),
            Delegate::Tot(m) => m.run.clone(),
            Delegate::Got(m) => m.run.clone(),
            Delegate::Trm(m) => m.run.clone(),
            Delegate::React(m) => {
                let r = &m.0;
                Run {
                    phase: react_phase(r.status),
                    request_id: r.request_id.as_deref().map(str::to_owned),
                    query: self.run.query.clone(),
                    llm_call_id: r.llm_call_id.as_deref().map(str::to_owned),
                    call_seq: r.call_seq,
                    llm_calls: r.iteration,
                    usage: r.usage,
                    result: r.result.clone(),
                    termination: r.termination.map(react_termination),
                    ..Run::default()
                }
            }
        };
        self.run = inner;
    }
}

fn lift_react(m: &react::Machine, config: &AdaptiveConfig, step: react::Step) -> Option<Step> {
    Some(match step {
        react::Step::CallLlm {
            call_id,
            request_id,
            iteration,
            ..
        } => Step::CallLlm(LlmCall {
            call_id,
            request_id,
            phase: Phase::AwaitingLlm,
            system_prompt: config.react_system_prompt.clone(),
            messages: m.conversation.messages().to_vec(),
            iteration,
        }),
        react::Step::ExecTool {
            call,
            request_id,
            iteration,
        } => Step::ExecTool {
            call,
            request_id,
            iteration,
        },
        react::Step::Reject {
            request_id,
            reason,
            message,
        } => Step::Reject {
            request_id,
            reason,
            message,
        },
        react::Step::CancelCalls { request_id, reason } => Step::CancelCalls { request_id, reason },
        react::Step::Completed {
            request_id,
            answer,
            termination,
        } => Step::Completed {
            request_id,
            answer,
            termination: react_termination(termination),
        },
        react::Step::Failed {
            request_id,
            error,
            termination,
        } => Step::Failed {
            request_id,
            error,
            termination: react_termination(termination),
        },
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

impl Machine for Adaptive {
    type Config = AdaptiveConfig;

    fn name(_config: &AdaptiveConfig) -> &'static str {
        "adaptive"
    }

    fn default_config() -> AdaptiveConfig {
        AdaptiveConfig::default()
    }

    fn run(&self) -> &Run {
        &self.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.run
    }

    /// Unused: [`Adaptive`] handles its events itself.
    fn begin(&mut self, _config: &AdaptiveConfig) -> Vec<Step> {
        Vec::new()
    }

    /// Unused: [`Adaptive`] handles its events itself.
    fn on_answer(&mut self, _config: &AdaptiveConfig, _text: String) -> Vec<Step> {
        Vec::new()
    }

    fn wants_tools(&self, _config: &AdaptiveConfig) -> bool {
        matches!(self.delegate, Delegate::React(_) | Delegate::Tot(_))
    }

    fn details(&self) -> Map<String, Value> {
        let mut d = match &self.delegate {
            Delegate::None => Map::new(),
            Delegate::Cod(m) | Delegate::Cot(m) => m.details(),
            Delegate::Aot(m) => m.details(),
            Delegate::Tot(m) => m.details(),
            Delegate::Got(m) => m.details(),
            Delegate::Trm(m) => m.details(),
            Delegate::React(m) => {
                let mut d = Map::new();
                d.insert("iteration".into(), m.0.iteration.into());
                d.insert("conversation_length".into(), m.0.conversation.len().into());
                d
            }
        };
        d.insert("selection".into(), json!(self.selection));
        d
    }

    fn handle(&mut self, config: &AdaptiveConfig, event: Event) -> Transition {
        if let Event::Start { request_id, query } = event {
            if self.run.phase.is_busy() {
                return Transition::taken(vec![busy(request_id, self.run.phase)]);
            }
            let selection = select(&query, config);
            self.delegate = match selection.strategy {
                Choice::Cod => Delegate::Cod(Cot::default()),
                Choice::Cot => Delegate::Cot(Cot::default()),
                Choice::React => Delegate::React(ReactMachine::default()),
                Choice::Aot => Delegate::Aot(Aot::default()),
                Choice::Tot => Delegate::Tot(Tot::default()),
                Choice::Got => Delegate::Got(Got::default()),
                Choice::Trm => Delegate::Trm(Trm::default()),
            };
            // Call ids stay unique across delegates.
            let seq = self.run.call_seq;
            match &mut self.delegate {
                Delegate::Cod(m) | Delegate::Cot(m) => m.run.call_seq = seq,
                Delegate::Aot(m) => m.run.call_seq = seq,
                Delegate::Tot(m) => m.run.call_seq = seq,
                Delegate::Got(m) => m.run.call_seq = seq,
                Delegate::Trm(m) => m.run.call_seq = seq,
                Delegate::React(m) => m.0.call_seq = seq,
                Delegate::None => {}
            }
            self.selection = Some(selection);
            self.run.query = query.clone();
            return self.delegate_event(config, Event::Start { request_id, query });
        }
        self.delegate_event(config, event)
    }
}
