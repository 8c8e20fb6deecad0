//! Algorithm of Thoughts: one model call that searches in context (first
//! operations, local expansion, backtracking) and ends with an `answer:`
//! line.
//!
//! Phases: `idle → exploring → completed | error`. The result
//! ([`AotResult`]) carries the answer, whether a solution was found, how
//! many first operations were tried, the backtracking steps, the raw text,
//! the usage, the termination and parser diagnostics. With
//! [`AotConfig::require_explicit_answer`] (the default) a search without an
//! `answer:` line fails (`missing_explicit_answer` when it claims a
//! solution, `no_solution` otherwise); without it, a claimed solution
//! completes with a null answer.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::machine::{Machine, Phase, Run, Step, Termination, error_value};
use crate::ai::client::Message;

/// How many worked examples the prompt shows.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// One example.
    Short,
    /// Two examples (the default).
    #[default]
    Standard,
    /// Three examples.
    Long,
}

/// The search order the prompt asks for.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchStyle {
    /// Depth first (the default).
    #[default]
    Dfs,
    /// Breadth first.
    Bfs,
}

impl SearchStyle {
    fn as_str(self) -> &'static str {
        match self {
            SearchStyle::Dfs => "dfs",
            SearchStyle::Bfs => "bfs",
        }
    }
}

/// The configuration of [`Aot`] (Jido's defaults).
#[derive(Clone, Debug)]
pub struct AotConfig {
    /// The examples' length (standard).
    pub profile: Profile,
    /// The search order (dfs).
    pub search_style: SearchStyle,
    /// Own worked examples, replacing the profile's.
    pub examples: Vec<String>,
    /// Whether only an `answer:` line counts as a solution (true).
    pub require_explicit_answer: bool,
}

impl Default for AotConfig {
    fn default() -> Self {
        AotConfig {
            profile: Profile::Standard,
            search_style: SearchStyle::Dfs,
            examples: Vec::new(),
            require_explicit_answer: true,
        }
    }
}

const EXAMPLE_SHORT: &str = "User: 8 6 4 4
Assistant:
Trying a promising first operation:
1. 8 - 6 : (4, 4, 2)
- 4 + 2 : (6, 4) 24 = 6 * 4 -> found it!
Backtracking the solution:
Step 1: 8 - 6 = 2
Step 2: 4 + 2 = 6
Step 3: 6 * 4 = 24
answer: (4 + (8 - 6)) * 4 = 24";

const EXAMPLE_STANDARD: [&str; 2] = [
    "User: 14 8 8 2
Assistant:
Trying a promising first operation:
1. 8 / 2 : (14, 8, 4)
- 14 - 8 : (6, 4) 24 = 6 * 4 -> found it!
Backtracking the solution:
Step 1: 8 / 2 = 4
Step 2: 14 - 8 = 6
Step 3: 6 * 4 = 24
answer: (14 - 8) * (8 / 2) = 24",
    "User: 9 5 5 5
Assistant:
Trying a promising first operation:
1. 5 + 5 : (10, 9, 5)
- 10 + 9 : (19, 5) 24 = 19 + 5 -> found it!
Backtracking the solution:
Step 1: 5 + 5 = 10
Step 2: 10 + 9 = 19
Step 3: 19 + 5 = 24
answer: ((5 + 5) + 9) + 5 = 24",
];

const EXAMPLE_LONG: &str = "User: 9 8 2 1
Assistant:
Trying a promising first operation:
1. 9 - 1 : (8, 8, 2)
- 8 * 2 : (16, 8) 24 = 16 + 8 -> found it!
Backtracking the solution:
Step 1: 9 - 1 = 8
Step 2: 8 * 2 = 16
Step 3: 16 + 8 = 24
answer: ((9 - 1) * 2) + 8 = 24";

impl AotConfig {
    /// The system prompt (Jido's, with the profile's examples).
    pub fn system_prompt(&self) -> String {
        let examples: Vec<&str> = if self.examples.is_empty() {
            match self.profile {
                Profile::Short => vec![EXAMPLE_SHORT],
                Profile::Standard => EXAMPLE_STANDARD.to_vec(),
                Profile::Long => {
                    let mut v = EXAMPLE_STANDARD.to_vec();
                    v.push(EXAMPLE_LONG);
                    v
                }
            }
        } else {
            self.examples.iter().map(String::as_str).collect()
        };
        format!(
            "You are an Algorithm-of-Thoughts reasoning assistant.

Follow this execution pattern:
1. Propose promising first operations.
2. Expand local branches with concrete calculations.
3. Backtrack when needed.
4. Finalize with an explicit line: \"answer: ...\"

Search style preference: {}.

Always include:
- \"Trying a promising first operation:\" markers
- \"Backtracking the solution:\" before final derivation when solved
- Explicit final answer line

Algorithmic examples:
{}",
            self.search_style.as_str(),
            examples.join("\n\n")
        )
    }

    /// The user message of the call for `problem`.
    pub fn user_prompt(problem: &str) -> String {
        format!(
            "Solve this problem using Algorithm-of-Thoughts style search and return an explicit final line as:\nanswer: <final answer>\n\nProblem:\n{problem}"
        )
    }
}

/// What one search produced (Jido's `AlgorithmOfThoughts.Result`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AotResult {
    /// The text of the `answer:` line.
    pub answer: Option<String>,
    /// Whether the search says it found a solution (`found it`, `solution
    /// found`, or an answer line).
    pub found_solution: bool,
    /// First operations tried (`Trying … promising first operation:`
    /// markers, or numbered `N. op : (…)` lines, whichever is more).
    pub first_operations_considered: u64,
    /// `Step N:` lines of the backtracked solution.
    pub backtracking_steps: u64,
    /// The model's whole answer.
    pub raw_response: String,
    /// Why it ended (`success`, `missing_explicit_answer`,
    /// `no_solution`).
    pub termination: Option<Termination>,
    /// `explicit_answer_required`, `explicit_answer_found`,
    /// `non_finalization_detected`, `found_markers`, `parser_mode`.
    pub diagnostics: Map<String, Value>,
}

/// Reads a search (see [`AotResult`]).
///
/// ```
/// use jido::ai::reasoning::aot::parse_search;
/// use jido::ai::reasoning::machine::Termination;
///
/// let r = parse_search("Trying a promising first operation:\n1. 8 / 2 : (14, 8, 4)\nStep 1: 8 / 2 = 4\nanswer: 24", true);
/// assert_eq!(r.answer.as_deref(), Some("24"));
/// assert_eq!((r.first_operations_considered, r.backtracking_steps), (1, 1));
/// assert_eq!(r.termination, Some(Termination::Success));
/// let r = parse_search("found it! but I forgot to say", true);
/// assert_eq!(r.termination, Some(Termination::MissingExplicitAnswer));
/// ```
pub fn parse_search(text: &str, require_explicit_answer: bool) -> AotResult {
    let normalized = text.trim();
    let lower = normalized.to_ascii_lowercase();
    let answer = explicit_answer(normalized);
    let by_phrase = lower
        .lines()
        .filter(|l| {
            l.contains("trying a promising first operation")
                || l.contains("trying another promising first operation")
        })
        .count() as u64;
    let by_index = normalized
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0
                && t[digits..].starts_with('.')
                && t[digits + 1..].split_once(':').is_some_and(|(op, rest)| {
                    !op.trim().is_empty() && rest.trim_start().starts_with('(')
                })
        })
        .count() as u64;
    let backtracking_steps = lower
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.strip_prefix("step").is_some_and(|r| {
                let r = r.trim_start();
                let d = r.bytes().take_while(u8::is_ascii_digit).count();
                d > 0 && r[d..].trim_start().starts_with(':')
            })
        })
        .count() as u64;
    let found_markers = (lower.matches("found it").count()
        + lower.matches("solution found").count()
        + lower.lines().filter(|l| answer_line(l).is_some()).count())
        as u64;
    let found_solution = found_markers > 0 || answer.is_some();
    let success = if require_explicit_answer {
        answer.as_deref().is_some_and(|a| !a.is_empty())
    } else {
        found_solution
    };
    let termination = if success {
        Termination::Success
    } else if found_solution && answer.is_none() {
        Termination::MissingExplicitAnswer
    } else {
        Termination::NoSolution
    };
    let mut diagnostics = Map::new();
    diagnostics.insert(
        "explicit_answer_required".into(),
        require_explicit_answer.into(),
    );
    diagnostics.insert("explicit_answer_found".into(), answer.is_some().into());
    diagnostics.insert(
        "non_finalization_detected".into(),
        (found_solution && answer.is_none()).into(),
    );
    diagnostics.insert("found_markers".into(), found_markers.into());
    diagnostics.insert("parser_mode".into(), "regex".into());
    AotResult {
        answer,
        found_solution,
        first_operations_considered: by_phrase.max(by_index),
        backtracking_steps,
        raw_response: text.to_owned(),
        termination: Some(termination),
        diagnostics,
    }
}

/// The text after `answer:` / `final answer:` at the start of a line.
fn answer_line(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let lower = t.to_ascii_lowercase();
    let skip = if lower.starts_with("final answer") {
        "final answer".len()
    } else if lower.starts_with("answer") {
        "answer".len()
    } else {
        return None;
    };
    let rest = t[skip..].trim_start();
    rest.strip_prefix(':')
        .or_else(|| rest.strip_prefix('：'))
        .map(str::trim)
}

/// The first explicit answer line's text (non-empty).
pub fn explicit_answer(text: &str) -> Option<String> {
    text.lines()
        .filter_map(answer_line)
        .find(|a| !a.is_empty())
        .map(str::to_owned)
}

/// The Algorithm-of-Thoughts machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Aot {
    /// The request bookkeeping.
    pub run: Run,
    /// The last search's result.
    pub search: Option<AotResult>,
}

impl Machine for Aot {
    type Config = AotConfig;

    fn name(_config: &AotConfig) -> &'static str {
        "aot"
    }

    fn default_config() -> AotConfig {
        AotConfig::default()
    }

    fn run(&self) -> &Run {
        &self.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.run
    }

    fn begin(&mut self, config: &AotConfig) -> Vec<Step> {
        self.search = None;
        let user = AotConfig::user_prompt(&self.run.query);
        vec![self.run.call(
            Phase::Exploring,
            Some(config.system_prompt()),
            vec![Message::user(user)],
        )]
    }

    fn on_answer(&mut self, config: &AotConfig, text: String) -> Vec<Step> {
        let result = parse_search(&text, config.require_explicit_answer);
        let termination = result.termination.unwrap_or(Termination::NoSolution);
        let mut value = serde_json::to_value(&result).unwrap_or(Value::Null);
        if let Some(o) = value.as_object_mut() {
            o.insert("usage".into(), json!(self.run.usage));
        }
        let answer = result.answer.clone();
        self.search = Some(result);
        let step = if termination == Termination::Success {
            self.run
                .complete(answer.map_or(Value::Null, Value::String), termination)
        } else {
            let message = match termination {
                Termination::MissingExplicitAnswer => {
                    "the search found a solution but gave no answer line"
                }
                _ => "the search found no solution",
            };
            self.run.fail(
                error_value(termination.as_str(), message, json!({"result": value})),
                termination,
            )
        };
        vec![step]
    }

    fn details(&self) -> Map<String, Value> {
        let mut d = Map::new();
        d.insert("search".into(), json!(self.search));
        d
    }
}
