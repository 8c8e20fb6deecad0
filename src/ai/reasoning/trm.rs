//! TRM (Tiny Recursive Model): reason, let a supervisor critique and
//! score the answer, improve it, and loop.
//!
//! Phases: `idle → reasoning → supervising → improving → reasoning … →
//! completed | error`. Each supervision step makes three calls:
//!
//! 1. *reasoning*: the first answer (step 1) or reasoning about the
//!    current one;
//! 2. *supervising*: a critique with `STRENGTH:` / `ISSUE:` / `SUGGESTION:`
//!    lines and `SCORE: x` ([`score_marker`]; 0.5 when missing or
//!    unreadable), recorded as the step's confidence; the best-scored
//!    answer is kept;
//! 3. *improving*: the improved answer becomes the current one.
//!
//! After the improvement the request completes with the best-scored answer
//! (or the current one) when the step was the last
//! ([`TrmConfig::max_supervision_steps`], 5) → `max_steps`; when the
//! confidence reached [`TrmConfig::act_threshold`] (0.9) or 0.98 →
//! `act_threshold`; when the last three confidences lie within 0.02 →
//! `convergence_detected`. Otherwise the next step starts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::machine::{Machine, Phase, Run, Step, Termination};
use super::parse::{marked_items, score_marker};
use crate::ai::client::Message;

/// Default most supervision steps (5, Jido's).
pub const DEFAULT_MAX_SUPERVISION_STEPS: u64 = 5;
/// Default confidence that stops early (0.9, Jido's).
pub const DEFAULT_ACT_THRESHOLD: f64 = 0.9;
/// The score of a critique without a readable `SCORE` (0.5, Jido's).
pub const DEFAULT_SCORE: f64 = 0.5;
/// How many recent confidences the convergence check looks at (3).
pub const CONVERGENCE_WINDOW: usize = 3;
/// Their largest spread that counts as converged (0.02).
pub const CONVERGENCE_EPSILON: f64 = 0.02;

/// The reasoning call's system prompt.
pub const REASONING_PROMPT: &str = "You are a careful problem solver. Reason about the question step by step and give a complete, correct answer.";

/// The supervision call's system prompt (Jido's format).
pub const SUPERVISION_PROMPT: &str = "You are a critical evaluator providing feedback on answers. Evaluate the answer for accuracy, completeness, clarity and relevance.

Provide your evaluation using this exact format:
- STRENGTH: [specific strength]
- ISSUE: [specific issue with the answer]
- SUGGESTION: [specific actionable improvement]
SCORE: [0.0-1.0] (overall quality score)

Higher scores (0.8+) mean the answer is mostly correct and complete. Lower scores (below 0.5) mean significant issues need addressing.";

/// The improvement call's system prompt.
pub const IMPROVEMENT_PROMPT: &str = "You are an assistant that improves answers based on feedback. Fix every issue, apply the suggestions, keep what was correct, and write the full improved answer (not a list of changes).";

/// The configuration of [`Trm`].
#[derive(Clone, Debug)]
pub struct TrmConfig {
    /// Most supervision steps (5).
    pub max_supervision_steps: u64,
    /// Confidence that stops early (0.9).
    pub act_threshold: f64,
}

impl Default for TrmConfig {
    fn default() -> Self {
        TrmConfig {
            max_supervision_steps: DEFAULT_MAX_SUPERVISION_STEPS,
            act_threshold: DEFAULT_ACT_THRESHOLD,
        }
    }
}

/// A parsed critique.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Feedback {
    /// `ISSUE:` lines.
    pub issues: Vec<String>,
    /// `SUGGESTION:` lines.
    pub suggestions: Vec<String>,
    /// `STRENGTH:` lines.
    pub strengths: Vec<String>,
    /// The `SCORE`, or 0.5.
    pub score: f64,
    /// Whether the score was read from the text (false: the default).
    pub score_found: bool,
}

/// Reads a critique.
///
/// ```
/// use jido::ai::reasoning::trm::parse_feedback;
///
/// let f = parse_feedback("ISSUE: no units\nSUGGESTION: add units\nSCORE: 0.6");
/// assert_eq!((f.issues.len(), f.suggestions.len(), f.score), (1, 1, 0.6));
/// assert_eq!(parse_feedback("looks fine").score, 0.5);
/// ```
pub fn parse_feedback(text: &str) -> Feedback {
    let score = score_marker(text);
    Feedback {
        issues: marked_items(text, &["ISSUE", "PROBLEM", "ERROR"]),
        suggestions: marked_items(text, &["SUGGESTION", "RECOMMEND", "IMPROVE"]),
        strengths: marked_items(text, &["STRENGTH"]),
        score: score.unwrap_or(DEFAULT_SCORE),
        score_found: score.is_some(),
    }
}

/// The TRM machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Trm {
    /// The request bookkeeping.
    pub run: Run,
    /// The current supervision step (1-based).
    pub step: u64,
    /// The answer being improved.
    pub current_answer: Option<String>,
    /// Every improved answer, in order.
    pub answer_history: Vec<String>,
    /// The best-scored answer so far.
    pub best_answer: Option<String>,
    /// Its score.
    pub best_score: f64,
    /// The confidence of each supervision, in order.
    pub confidence_history: Vec<f64>,
    /// The last critique.
    pub feedback: Option<Feedback>,
    /// The last reasoning text.
    pub reasoning: Option<String>,
}

impl Trm {
    fn reasoning_call(&mut self) -> Step {
        let question = &self.run.query;
        let user = match &self.current_answer {
            None => format!("Question: {question}"),
            Some(answer) => format!(
                "Question: {question}\n\nCurrent answer:\n{answer}\n\nReason about this answer: what is right, what is wrong or missing, and what the correct answer is."
            ),
        };
        self.run.call(
            Phase::Reasoning,
            Some(REASONING_PROMPT.to_owned()),
            vec![Message::user(user)],
        )
    }

    fn halt(&self, config: &TrmConfig) -> Option<Termination> {
        if self.step >= config.max_supervision_steps {
            return Some(Termination::MaxSteps);
        }
        let confidence = self.confidence_history.last().copied().unwrap_or(0.0);
        if confidence >= config.act_threshold {
            return Some(Termination::ActThreshold);
        }
        if self.confidence_history.len() >= CONVERGENCE_WINDOW {
            let recent =
                &self.confidence_history[self.confidence_history.len() - CONVERGENCE_WINDOW..];
            let max = recent.iter().copied().fold(f64::MIN, f64::max);
            let min = recent.iter().copied().fold(f64::MAX, f64::min);
            if max - min < CONVERGENCE_EPSILON {
                return Some(Termination::ConvergenceDetected);
            }
        }
        if confidence >= 0.98 {
            return Some(Termination::ActThreshold);
        }
        None
    }
}

impl Machine for Trm {
    type Config = TrmConfig;

    fn name(_config: &TrmConfig) -> &'static str {
        "trm"
    }

    fn default_config() -> TrmConfig {
        TrmConfig::default()
    }

    fn run(&self) -> &Run {
        &self.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.run
    }

    fn begin(&mut self, _config: &TrmConfig) -> Vec<Step> {
        let run = std::mem::take(&mut self.run);
        *self = Trm {
            run,
            step: 1,
            ..Trm::default()
        };
        vec![self.reasoning_call()]
    }

    fn on_answer(&mut self, config: &TrmConfig, text: String) -> Vec<Step> {
        match self.run.phase {
            Phase::Reasoning => {
                if self.current_answer.is_none() {
                    self.current_answer = Some(text.trim().to_owned());
                }
                self.reasoning = Some(text);
                let user = format!(
                    "Question: {}\n\nAnswer to evaluate:\n{}\n\nEvaluation step: {}",
                    self.run.query,
                    self.current_answer.as_deref().unwrap_or(""),
                    self.step
                );
                vec![self.run.call(
                    Phase::Supervising,
                    Some(SUPERVISION_PROMPT.to_owned()),
                    vec![Message::user(user)],
                )]
            }
            Phase::Supervising => {
                let feedback = parse_feedback(&text);
                self.confidence_history.push(feedback.score);
                if feedback.score > self.best_score || self.best_answer.is_none() {
                    self.best_score = feedback.score;
                    self.best_answer = self.current_answer.clone();
                }
                let list = |items: &[String]| {
                    if items.is_empty() {
                        "(none)".to_owned()
                    } else {
                        items
                            .iter()
                            .map(|i| format!("- {i}"))
                            .collect::<Vec<_>>()
                            .join("\n")
                    }
                };
                let user = format!(
                    "Original question: {}\n\nCurrent answer:\n{}\n\nQuality score: {}\n\nStrengths to keep:\n{}\n\nIssues to fix:\n{}\n\nSuggestions:\n{}\n\nWrite the complete improved answer.",
                    self.run.query,
                    self.current_answer.as_deref().unwrap_or(""),
                    feedback.score,
                    list(&feedback.strengths),
                    list(&feedback.issues),
                    list(&feedback.suggestions),
                );
                self.feedback = Some(feedback);
                vec![self.run.call(
                    Phase::Improving,
                    Some(IMPROVEMENT_PROMPT.to_owned()),
                    vec![Message::user(user)],
                )]
            }
            Phase::Improving => {
                let improved = text.trim().to_owned();
                if !improved.is_empty() {
                    self.answer_history.push(improved.clone());
                    self.current_answer = Some(improved);
                }
                match self.halt(config) {
                    Some(termination) => {
                        let answer = self
                            .best_answer
                            .clone()
                            .filter(|a| !a.is_empty())
                            .or_else(|| self.current_answer.clone())
                            .unwrap_or_default();
                        vec![self.run.complete(Value::String(answer), termination)]
                    }
                    None => {
                        self.step += 1;
                        vec![self.reasoning_call()]
                    }
                }
            }
            _ => Vec::new(),
        }
    }

    fn details(&self) -> Map<String, Value> {
        let mut d = Map::new();
        d.insert("supervision_step".into(), self.step.into());
        d.insert("best_score".into(), json!(self.best_score));
        d.insert("confidence_history".into(), json!(self.confidence_history));
        d.insert("answer_history".into(), json!(self.answer_history));
        d.insert("current_answer".into(), json!(self.current_answer));
        d.insert("feedback".into(), json!(self.feedback));
        d
    }
}
