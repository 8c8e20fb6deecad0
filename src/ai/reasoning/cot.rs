//! Chain of Thought and Chain of Draft: one model call that reasons step
//! by step, parsed into steps and a conclusion.
//!
//! Phases: `idle → reasoning → completed | error`. The call's system
//! prompt is [`COT_PROMPT`] (numbered steps, then `Conclusion:` or
//! `Answer:`) or, for Chain of Draft, [`COD_PROMPT`] (drafts of at most
//! five words, the answer after `####`); a configured system prompt
//! replaces it. The steps are the numbered or bulleted lines (for Chain
//! of Draft without those, every line before the answer is a draft). The
//! answer is the conclusion
//! ([`steps_and_conclusion`]), or the whole text when the model wrote no
//! conclusion marker; a blank answer fails with `empty_response`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::machine::{Machine, Phase, Run, Step, Termination, error_value};
use super::parse::{ReasoningStep, drafts, steps_and_conclusion};
use crate::ai::client::Message;

/// Jido's Chain-of-Thought system prompt.
pub const COT_PROMPT: &str =
    "You are a helpful AI assistant that thinks through problems step by step.

When solving problems:
1. Break down the problem into clear, logical steps
2. Show your reasoning for each step
3. Number your steps (Step 1:, Step 2:, etc.)
4. After all steps, provide your final answer clearly marked as \"Conclusion:\" or \"Answer:\"

Think carefully and explain your reasoning at each step.";

/// The Chain-of-Draft system prompt (terse drafts, answer after `####`).
pub const COD_PROMPT: &str = "Think step by step, but only keep a minimum draft for each thinking step, with five words at most. Write each draft on its own line. Return the answer at the end of the response after a separator ####.";

/// Which of the two strategies.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Chain of Thought (`ai.cot.*`).
    #[default]
    Thought,
    /// Chain of Draft (`ai.cod.*`).
    Draft,
}

/// The configuration of [`Cot`].
#[derive(Clone, Debug, Default)]
pub struct CotConfig {
    /// Thought or draft.
    pub style: Style,
    /// Replaces the style's system prompt.
    pub system_prompt: Option<String>,
}

impl CotConfig {
    /// Chain of Thought with its prompt.
    pub fn thought() -> Self {
        CotConfig::default()
    }

    /// Chain of Draft with its prompt.
    pub fn draft() -> Self {
        CotConfig {
            style: Style::Draft,
            system_prompt: None,
        }
    }

    /// The system prompt of the call.
    pub fn prompt(&self) -> String {
        self.system_prompt.clone().unwrap_or_else(|| {
            match self.style {
                Style::Thought => COT_PROMPT,
                Style::Draft => COD_PROMPT,
            }
            .to_owned()
        })
    }
}

/// The Chain-of-Thought / Chain-of-Draft machine.
///
/// ```
/// use jido::ai::reasoning::cot::{Cot, CotConfig};
/// use jido::ai::reasoning::machine::{Event, Machine, Phase, Step};
/// use jido::ai::react::machine::Turn;
/// use serde_json::json;
///
/// let cfg = CotConfig::thought();
/// let mut m = Cot::default();
/// let t = m.handle(&cfg, Event::Start { request_id: "r1".into(), query: "6*7?".into() });
/// let Step::CallLlm(call) = &t.steps[0] else { unreachable!() };
/// assert_eq!(m.run().phase, Phase::Reasoning);
/// m.handle(&cfg, Event::LlmResult {
///     call_id: call.call_id.clone(),
///     result: Ok(Turn::answer("Step 1: 6*7 = 42\nAnswer: 42")),
/// });
/// assert_eq!(m.run().phase, Phase::Completed);
/// assert_eq!(m.run().result, json!("42"));
/// assert_eq!(m.steps.len(), 1);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Cot {
    /// The request bookkeeping.
    pub run: Run,
    /// The parsed steps (drafts).
    pub steps: Vec<ReasoningStep>,
    /// The parsed conclusion, if the model marked one.
    pub conclusion: Option<String>,
    /// The model's whole answer.
    pub raw_response: Option<String>,
}

impl Machine for Cot {
    type Config = CotConfig;

    fn name(config: &CotConfig) -> &'static str {
        match config.style {
            Style::Thought => "cot",
            Style::Draft => "cod",
        }
    }

    fn default_config() -> CotConfig {
        CotConfig::thought()
    }

    fn run(&self) -> &Run {
        &self.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.run
    }

    fn begin(&mut self, config: &CotConfig) -> Vec<Step> {
        self.steps.clear();
        self.conclusion = None;
        self.raw_response = None;
        let query = self.run.query.clone();
        vec![self.run.call(
            Phase::Reasoning,
            Some(config.prompt()),
            vec![Message::user(query)],
        )]
    }

    fn on_answer(&mut self, config: &CotConfig, text: String) -> Vec<Step> {
        if text.trim().is_empty() {
            self.raw_response = Some(text);
            let error = error_value("empty_response", "the model gave no answer", json!({}));
            return vec![self.run.fail(error, Termination::Error)];
        }
        let (mut steps, conclusion) = steps_and_conclusion(&text);
        if steps.is_empty() && config.style == Style::Draft {
            steps = drafts(&text);
        }
        let answer = conclusion.clone().unwrap_or_else(|| text.trim().to_owned());
        self.steps = steps;
        self.conclusion = conclusion;
        self.raw_response = Some(text);
        vec![
            self.run
                .complete(Value::String(answer), Termination::Success),
        ]
    }

    fn details(&self) -> Map<String, Value> {
        let mut d = Map::new();
        d.insert("steps".into(), json!(self.steps));
        d.insert("conclusion".into(), json!(self.conclusion));
        d.insert("raw_response".into(), json!(self.raw_response));
        d
    }
}

/// The Chain-of-Draft machine: [`Cot`] with [`CotConfig::draft`] as its
/// default configuration and `cod` as its name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Cod(pub Cot);

impl Machine for Cod {
    type Config = CotConfig;

    fn name(_config: &CotConfig) -> &'static str {
        "cod"
    }

    fn default_config() -> CotConfig {
        CotConfig::draft()
    }

    fn run(&self) -> &Run {
        &self.0.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.0.run
    }

    fn begin(&mut self, config: &CotConfig) -> Vec<Step> {
        self.0.begin(config)
    }

    fn on_answer(&mut self, config: &CotConfig, text: String) -> Vec<Step> {
        self.0.on_answer(config, text)
    }

    fn details(&self) -> Map<String, Value> {
        self.0.details()
    }
}
