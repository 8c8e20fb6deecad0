//! Graph of Thoughts: thoughts as a DAG, connected, aggregated into a
//! conclusion, then refined and aggregated again.
//!
//! Phases: `idle → generating → connecting → aggregating → generating … →
//! completed | error`. Nodes are the question (the root), thoughts and
//! aggregates; edges are `generates` (root → thought), `refines`
//! (aggregate → refined thought), `connects` (thought → thought of the
//! same round, earlier to later, so the graph stays acyclic) and
//! `aggregates` (thought → aggregate). One round makes three calls:
//!
//! 1. *generating*: [`GotConfig::thoughts_per_round`] (3) thoughts — from
//!    the question, then refinements of the last aggregate — read with
//!    [`parse_thoughts`]; none readable fails the request
//!    (`thoughts_parse_failed`);
//! 2. *connecting*: relations between the round's thoughts and a score
//!    per thought, JSON `{"connections": [{"from": "n1", "to": "n2"}],
//!    "scores": {"n1": 0.8}}` or `CONNECTION: n1 -> n2` lines and
//!    [`parse_scores`] lines; unreadable output means no connections and
//!    scores of 0.5 (never fatal);
//! 3. *aggregating*: [`Aggregation::Synthesis`] (one coherent conclusion),
//!    [`Aggregation::Voting`] (the answer most thoughts support) or
//!    [`Aggregation::Weighted`] (thoughts weighed by their scores); the
//!    conclusion ([`steps_and_conclusion`], else the whole text) becomes
//!    the aggregate node; a blank answer fails (`empty_response`).
//!
//! Another round starts while rounds remain ([`GotConfig::max_rounds`],
//! 2) and the next aggregate fits in [`GotConfig::max_depth`] (5) and
//! [`GotConfig::max_nodes`] (20); else the request completes with the last
//! aggregate: `success` when the rounds were used, `max_depth` or
//! `max_nodes` when a limit stopped it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::machine::{Machine, Phase, Run, Step, Termination, error_value};
use super::parse::{extract_json, parse_scores, parse_thoughts, steps_and_conclusion};
use crate::ai::client::Message;

/// The system prompt of every GoT call.
pub const GOT_PROMPT: &str = "You are a reasoning assistant that explores problems through graph-based thinking: distinct thoughts, the relations between them, and conclusions that combine them. Be specific and concise.";

/// How the thoughts of a round are combined.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregation {
    /// One coherent conclusion from all thoughts (the default).
    #[default]
    Synthesis,
    /// The answer most thoughts support.
    Voting,
    /// Thoughts weighed by their scores.
    Weighted,
}

impl Aggregation {
    /// `"synthesis"`, `"voting"` or `"weighted"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Aggregation::Synthesis => "synthesis",
            Aggregation::Voting => "voting",
            Aggregation::Weighted => "weighted",
        }
    }
}

/// The configuration of [`Got`].
#[derive(Clone, Debug)]
pub struct GotConfig {
    /// Most nodes, the root included (20, Jido's).
    pub max_nodes: usize,
    /// Deepest node (5, Jido's).
    pub max_depth: u64,
    /// How rounds are aggregated (synthesis).
    pub aggregation: Aggregation,
    /// Thoughts per round (3).
    pub thoughts_per_round: usize,
    /// Most generate–connect–aggregate rounds (2).
    pub max_rounds: u64,
}

impl Default for GotConfig {
    fn default() -> Self {
        GotConfig {
            max_nodes: 20,
            max_depth: 5,
            aggregation: Aggregation::Synthesis,
            thoughts_per_round: 3,
            max_rounds: 2,
        }
    }
}

/// What a node holds.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    /// The question.
    #[default]
    Root,
    /// A generated thought.
    Thought,
    /// A round's conclusion.
    Aggregate,
}

/// A node of the graph.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Its index in [`Got::nodes`] (its id is `n<index>`).
    pub id: usize,
    /// What it holds.
    pub kind: NodeKind,
    /// The text.
    pub content: String,
    /// Distance from the root along its longest incoming path.
    pub depth: u64,
    /// The connecting call's score (thoughts only).
    pub score: Option<f64>,
}

/// An edge's meaning.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeKind {
    /// The question led to a thought.
    Generates,
    /// An aggregate led to a refined thought.
    Refines,
    /// A thought feeds an aggregate.
    Aggregates,
    /// Two thoughts of a round are related.
    Connects,
}

/// A directed edge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    /// Source node.
    pub from: usize,
    /// Target node.
    pub to: usize,
    /// Meaning.
    pub kind: EdgeKind,
}

/// The Graph-of-Thoughts machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Got {
    /// The request bookkeeping.
    pub run: Run,
    /// The nodes; index 0 is the root.
    pub nodes: Vec<Node>,
    /// The edges, in creation order.
    pub edges: Vec<Edge>,
    /// The node the current round starts from.
    pub source: usize,
    /// The current round's thoughts.
    pub round_thoughts: Vec<usize>,
    /// Rounds started.
    pub rounds: u64,
    /// The last aggregate.
    pub conclusion: Option<usize>,
    /// The aggregation of the request.
    pub aggregation: Aggregation,
}

fn node_ref(id: usize) -> String {
    format!("n{id}")
}

fn parse_node_ref(s: &str) -> Option<usize> {
    let t = s.trim().trim_matches(['[', ']', '"', '*']);
    t.strip_prefix('n')
        .or_else(|| t.strip_prefix('N'))
        .unwrap_or(t)
        .parse()
        .ok()
}

/// Connections `(from, to)` from a connecting answer (JSON `connections`
/// or `CONNECTION: n1 -> n2` lines), unfiltered.
pub fn parse_connections(text: &str) -> Vec<(usize, usize)> {
    if let Some(Value::Object(o)) = extract_json(text)
        && let Some(list) = o.get("connections").and_then(Value::as_array)
    {
        return list
            .iter()
            .filter_map(|c| {
                let end = |k: &str| match c.get(k)? {
                    Value::String(s) => parse_node_ref(s),
                    Value::Number(n) => n.as_u64().and_then(|n| usize::try_from(n).ok()),
                    _ => None,
                };
                Some((end("from")?, end("to")?))
            })
            .collect();
    }
    text.lines()
        .filter_map(|line| {
            let t = line.trim().trim_start_matches(['-', '*', ' ']);
            let rest = t
                .get(..11)
                .filter(|p| p.eq_ignore_ascii_case("connection:"))?;
            let body = &t[rest.len()..];
            let (from, to) = body.split_once("->")?;
            let to = to.split(':').next()?;
            Some((parse_node_ref(from)?, parse_node_ref(to)?))
        })
        .collect()
}

impl Got {
    fn thought_list(&self, ids: &[usize], with_scores: bool) -> String {
        ids.iter()
            .filter_map(|&i| self.nodes.get(i))
            .map(|n| match (with_scores, n.score) {
                (true, Some(s)) => format!("{} (score {s}): {}", node_ref(n.id), n.content),
                _ => format!("{}: {}", node_ref(n.id), n.content),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn generate(&mut self, config: &GotConfig) -> Step {
        self.rounds += 1;
        let k = config.thoughts_per_round.max(1);
        let question = &self.run.query;
        let user = match self.conclusion.and_then(|c| self.nodes.get(c)) {
            None => format!(
                "Problem: {question}\n\nGenerate {k} distinct thoughts (approaches, insights or partial answers) about this problem. Return JSON {{\"thoughts\":[{{\"content\":\"...\"}}]}} or a numbered list."
            ),
            Some(c) => format!(
                "Problem: {question}\n\nCurrent conclusion:\n{}\n\nGenerate {k} distinct refinements of this conclusion (corrections, missing points, better formulations). Return JSON {{\"thoughts\":[{{\"content\":\"...\"}}]}} or a numbered list.",
                c.content
            ),
        };
        self.run.call(
            Phase::Generating,
            Some(GOT_PROMPT.to_owned()),
            vec![Message::user(user)],
        )
    }

    fn connect(&mut self) -> Step {
        let user = format!(
            "Problem: {}\n\nThoughts:\n{}\n\nFind the meaningful relations between these thoughts and score each thought from 0.0 to 1.0. Return JSON {{\"connections\":[{{\"from\":\"n1\",\"to\":\"n2\",\"relation\":\"...\"}}],\"scores\":{{\"n1\":0.8}}}} or lines `CONNECTION: n1 -> n2 : relation` and `n1: 0.8`.",
            self.run.query,
            self.thought_list(&self.round_thoughts, false)
        );
        self.run.call(
            Phase::Connecting,
            Some(GOT_PROMPT.to_owned()),
            vec![Message::user(user)],
        )
    }

    fn aggregate(&mut self) -> Step {
        let connections = self
            .edges
            .iter()
            .filter(|e| e.kind == EdgeKind::Connects && self.round_thoughts.contains(&e.to))
            .map(|e| format!("{} -> {}", node_ref(e.from), node_ref(e.to)))
            .collect::<Vec<_>>();
        let instruction = match self.aggregation {
            Aggregation::Synthesis => {
                "Synthesize these thoughts into one coherent conclusion: keep the key insight of each, resolve contradictions."
            }
            Aggregation::Voting => {
                "Let each thought vote for the answer it supports, and report the answer with the most votes."
            }
            Aggregation::Weighted => {
                "Combine these thoughts into one conclusion, giving each thought weight in proportion to its score."
            }
        };
        let user = format!(
            "Problem: {}\n\nThoughts:\n{}\n\nRelations: {}\n\n{instruction} End with a line `Answer: <conclusion>`.",
            self.run.query,
            self.thought_list(
                &self.round_thoughts,
                self.aggregation == Aggregation::Weighted
            ),
            if connections.is_empty() {
                "(none)".to_owned()
            } else {
                connections.join(", ")
            }
        );
        self.run.call(
            Phase::Aggregating,
            Some(GOT_PROMPT.to_owned()),
            vec![Message::user(user)],
        )
    }

    fn add_node(&mut self, kind: NodeKind, content: String, depth: u64) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node {
            id,
            kind,
            content,
            depth,
            score: None,
        });
        id
    }

    fn finish(&mut self, termination: Termination) -> Step {
        match self.conclusion.and_then(|c| self.nodes.get(c)) {
            Some(node) => {
                let answer = node.content.clone();
                self.run.complete(Value::String(answer), termination)
            }
            None => self.run.fail(
                error_value("no_solution_found", "no conclusion was reached", json!({})),
                termination,
            ),
        }
    }
}

impl Machine for Got {
    type Config = GotConfig;

    fn name(_config: &GotConfig) -> &'static str {
        "got"
    }

    fn default_config() -> GotConfig {
        GotConfig::default()
    }

    fn run(&self) -> &Run {
        &self.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.run
    }

    fn begin(&mut self, config: &GotConfig) -> Vec<Step> {
        let run = std::mem::take(&mut self.run);
        *self = Got {
            nodes: vec![Node {
                content: run.query.clone(),
                ..Node::default()
            }],
            run,
            aggregation: config.aggregation,
            ..Got::default()
        };
        vec![self.generate(config)]
    }

    fn on_answer(&mut self, config: &GotConfig, text: String) -> Vec<Step> {
        let step = match self.run.phase {
            Phase::Generating => {
                let (thoughts, _) = parse_thoughts(&text);
                if thoughts.is_empty() {
                    self.run.fail(
                        error_value(
                            "thoughts_parse_failed",
                            "could not read thoughts from the model's answer",
                            json!({"answer": text}),
                        ),
                        Termination::Error,
                    )
                } else {
                    // Room for the thoughts and this round's aggregate.
                    let room = config.max_nodes.saturating_sub(self.nodes.len() + 1);
                    let source = self.source;
                    let depth = self.nodes[source].depth + 1;
                    let kind = if source == 0 {
                        EdgeKind::Generates
                    } else {
                        EdgeKind::Refines
                    };
                    self.round_thoughts.clear();
                    for content in thoughts
                        .into_iter()
                        .take(config.thoughts_per_round.max(1).min(room))
                    {
                        let id = self.add_node(NodeKind::Thought, content, depth);
                        self.edges.push(Edge {
                            from: source,
                            to: id,
                            kind,
                        });
                        self.round_thoughts.push(id);
                    }
                    if self.round_thoughts.is_empty() {
                        self.finish(Termination::MaxNodes)
                    } else {
                        self.connect()
                    }
                }
            }
            Phase::Connecting => {
                let round = self.round_thoughts.clone();
                let mut seen = Vec::new();
                for (from, to) in parse_connections(&text) {
                    if from < to
                        && round.contains(&from)
                        && round.contains(&to)
                        && !seen.contains(&(from, to))
                    {
                        seen.push((from, to));
                        self.edges.push(Edge {
                            from,
                            to,
                            kind: EdgeKind::Connects,
                        });
                    }
                }
                let ids: Vec<String> = round.iter().map(|&i| node_ref(i)).collect();
                let scores = parse_scores(&text, &ids)
                    .map(|(s, _)| s)
                    .unwrap_or_else(|| vec![0.5; round.len()]);
                for (&id, score) in round.iter().zip(scores) {
                    self.nodes[id].score = Some(score);
                }
                self.aggregate()
            }
            Phase::Aggregating => {
                if text.trim().is_empty() {
                    self.run.fail(
                        error_value("empty_response", "the model gave no answer", json!({})),
                        Termination::Error,
                    )
                } else {
                    let (_, conclusion) = steps_and_conclusion(&text);
                    let content = conclusion.unwrap_or_else(|| text.trim().to_owned());
                    let depth = self
                        .round_thoughts
                        .iter()
                        .map(|&i| self.nodes[i].depth)
                        .max()
                        .unwrap_or(0)
                        + 1;
                    let id = self.add_node(NodeKind::Aggregate, content, depth);
                    for from in self.round_thoughts.clone() {
                        self.edges.push(Edge {
                            from,
                            to: id,
                            kind: EdgeKind::Aggregates,
                        });
                    }
                    self.conclusion = Some(id);
                    self.source = id;
                    if self.rounds >= config.max_rounds {
                        self.finish(Termination::Success)
                    } else if depth + 2 > config.max_depth {
                        self.finish(Termination::MaxDepth)
                    } else if self.nodes.len() + 2 > config.max_nodes {
                        self.finish(Termination::MaxNodes)
                    } else {
                        self.generate(config)
                    }
                }
            }
            _ => return Vec::new(),
        };
        vec![step]
    }

    fn details(&self) -> Map<String, Value> {
        let mut d = Map::new();
        d.insert("aggregation".into(), self.aggregation.as_str().into());
        d.insert("rounds".into(), self.rounds.into());
        d.insert("node_count".into(), self.nodes.len().into());
        d.insert("nodes".into(), json!(self.nodes));
        d.insert("edges".into(), json!(self.edges));
        d.insert("conclusion".into(), json!(self.conclusion));
        d
    }
}
