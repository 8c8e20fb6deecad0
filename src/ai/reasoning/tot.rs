//! Tree of Thoughts: grow a tree of candidate thoughts, score them, and
//! expand the most promising ones.
//!
//! Phases: `idle → generating → evaluating → generating … → completed |
//! error` (Jido's transient `expanding` — choosing the next node — happens
//! inside one transition). From the root (the question), each expansion
//! makes two calls:
//!
//! 1. *generating*: [`TotConfig::branching_factor`] (3) thoughts continuing
//!    the node's path, read with [`parse_thoughts`] (JSON `{"thoughts":
//!    [...]}`, else a numbered list; extra thoughts are dropped);
//! 2. *evaluating*: a score in `[0, 1]` per thought, read with
//!    [`parse_scores`] (JSON `{"scores": {"t1": 0.8}}`, else `t1: 0.8` /
//!    `1. 0.8` lines; a thought without a score gets 0.5).
//!
//! When either answer cannot be read, the call is repeated once with the
//! model's answer and a request for strict JSON
//! ([`TotConfig::max_parse_retries`], 1); a second failure fails the
//! request (`thoughts_parse_failed` / `scores_parse_failed`). Each call may
//! use tools (when the strategy has some): up to 3 tool round trips, the
//! results appended in call order.
//!
//! After each evaluation, in order: the node limit
//! ([`TotConfig::max_nodes`], 100) → `max_nodes`; a new thought at depth ≥
//! [`TotConfig::min_depth`] (2) scoring ≥
//! [`TotConfig::early_success_threshold`] (1.0) → `threshold` (that
//! thought wins); the best score improving by less than 0.02 over the last
//! 2 evaluations → `converged`; the new thoughts at
//! [`TotConfig::max_depth`] (3) → `max_depth`. Otherwise the next node
//! comes from the frontier: [`Traversal::BestFirst`] (highest score),
//! [`Traversal::Bfs`] (oldest) or [`Traversal::Dfs`] (newest). The answer
//! is the winning thought (else the best-scored leaf); the result keeps
//! its path and the [`TotConfig::top_k`] (3) best leaves.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::machine::{Machine, Phase, Run, Step, Termination, error_value};
use super::parse::{ParserMode, parse_scores, parse_thoughts};
use crate::ai::client::Message;

/// The generation call's system prompt (Jido's).
pub const GENERATION_PROMPT: &str =
    "You are a reasoning assistant that generates multiple distinct approaches to solve problems.

Return strict JSON with this shape:
{\"thoughts\":[{\"id\":\"t1\",\"content\":\"...\"},{\"id\":\"t2\",\"content\":\"...\"}]}

Rules:
- each thought must be materially different
- keep each thought concise
- return valid JSON only (no markdown wrappers)";

/// The evaluation call's system prompt (Jido's).
pub const EVALUATION_PROMPT: &str =
    "You are a reasoning assistant that evaluates the quality of solution approaches.

For each thought/approach, provide a score from 0.0 to 1.0 based on:
- Correctness: Is the reasoning valid?
- Progress: Does it move toward solving the problem?
- Completeness: How close is it to a full solution?

If a thought represents a complete and correct solution, give it a score of 1.0.

Return strict JSON with this shape:
{\"scores\":{\"t1\":0.82,\"t2\":0.61}}

Rules:
- keys must match provided thought IDs
- scores must be numeric in [0.0, 1.0]
- return valid JSON only (no markdown wrappers)";

/// How the next node to expand is chosen.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Traversal {
    /// The best-scored node of the frontier (the default).
    #[default]
    BestFirst,
    /// Breadth first: the oldest node of the frontier.
    Bfs,
    /// Depth first: the newest node.
    Dfs,
}

/// The configuration of [`Tot`] (Jido's defaults).
#[derive(Clone, Debug)]
pub struct TotConfig {
    /// Thoughts per expansion (3).
    pub branching_factor: usize,
    /// Deepest thoughts (3).
    pub max_depth: u64,
    /// The frontier order (best first).
    pub traversal: Traversal,
    /// Leaves kept in the result (3).
    pub top_k: usize,
    /// Shallowest depth for an early success (2).
    pub min_depth: u64,
    /// Most nodes, the root included (100).
    pub max_nodes: usize,
    /// Score that ends the search early (1.0).
    pub early_success_threshold: f64,
    /// Evaluations the convergence check spans (2).
    pub convergence_window: usize,
    /// Least best-score gain over that window (0.02).
    pub min_score_improvement: f64,
    /// Repair calls per phase of a request (1).
    pub max_parse_retries: u32,
    /// Tool round trips per model call (3).
    pub max_tool_rounds: u32,
    /// Keep at most this many frontier nodes (best first only; none).
    pub beam_width: Option<usize>,
}

impl Default for TotConfig {
    fn default() -> Self {
        TotConfig {
            branching_factor: 3,
            max_depth: 3,
            traversal: Traversal::BestFirst,
            top_k: 3,
            min_depth: 2,
            max_nodes: 100,
            early_success_threshold: 1.0,
            convergence_window: 2,
            min_score_improvement: 0.02,
            max_parse_retries: 1,
            max_tool_rounds: 3,
            beam_width: None,
        }
    }
}

/// A node of the tree (the root is the question).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Its index in [`Tot::nodes`].
    pub id: usize,
    /// Its parent (none for the root).
    pub parent: Option<usize>,
    /// The thought (the question for the root).
    pub content: String,
    /// Its score (none for the root).
    pub score: Option<f64>,
    /// Its children, in generation order.
    pub children: Vec<usize>,
    /// 0 for the root.
    pub depth: u64,
}

/// Repair calls used by a request, per phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParseRetries {
    /// Generation repairs.
    pub generation: u32,
    /// Evaluation repairs.
    pub evaluation: u32,
}

/// The Tree-of-Thoughts machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Tot {
    /// The request bookkeeping.
    pub run: Run,
    /// The tree; index 0 is the root.
    pub nodes: Vec<Node>,
    /// The node being expanded.
    pub current: usize,
    /// Thoughts generated for it, awaiting their scores.
    pub pending: Vec<String>,
    /// Nodes waiting to be expanded, in expansion order.
    pub frontier: Vec<usize>,
    /// Repair calls used.
    pub parse_retries: ParseRetries,
    /// How the last answer was read.
    pub parser_mode: Option<ParserMode>,
    /// The best score after each evaluation.
    pub recent_best_scores: Vec<f64>,
    /// Root-to-answer path (node ids) once completed.
    pub solution_path: Vec<usize>,
    /// Leaves the result keeps ([`TotConfig::top_k`] of the request).
    pub top_k: usize,
}

impl Tot {
    /// The nodes from the root to `id`.
    pub fn path(&self, id: usize) -> Vec<&Node> {
        let mut out = Vec::new();
        let mut at = Some(id);
        while let Some(i) = at {
            let Some(node) = self.nodes.get(i) else { break };
            out.push(node);
            at = node.parent;
        }
        out.reverse();
        out
    }

    fn path_text(&self, id: usize) -> String {
        self.path(id)
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if i == 0 {
                    format!("Problem: {}", n.content)
                } else {
                    format!("Step {i}: {}", n.content)
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn generate(&mut self, config: &TotConfig) -> Step {
        let node = self.current;
        let n = config.branching_factor.max(1);
        let user = if node == 0 {
            format!(
                "Generate {n} different approaches to solve this problem:\n\n{}",
                self.path_text(node)
            )
        } else {
            format!(
                "Given the reasoning so far, generate {n} different next steps:\n\n{}",
                self.path_text(node)
            )
        };
        self.run.call(
            Phase::Generating,
            Some(GENERATION_PROMPT.to_owned()),
            vec![Message::user(user)],
        )
    }

    fn evaluate(&mut self) -> Step {
        let thoughts = self
            .pending
            .iter()
            .enumerate()
            .map(|(i, t)| format!("t{}: {t}", i + 1))
            .collect::<Vec<_>>()
            .join("\n");
        let user = format!(
            "{}\n\nEvaluate these candidate thoughts:\n{thoughts}",
            self.path_text(self.current)
        );
        self.run.call(
            Phase::Evaluating,
            Some(EVALUATION_PROMPT.to_owned()),
            vec![Message::user(user)],
        )
    }

    fn repair_or_fail(&mut self, config: &TotConfig, text: String, generation: bool) -> Step {
        let used = if generation {
            &mut self.parse_retries.generation
        } else {
            &mut self.parse_retries.evaluation
        };
        if *used < config.max_parse_retries {
            *used += 1;
            let shape = if generation {
                "{\"thoughts\":[{\"id\":\"t1\",\"content\":\"...\"}]}"
            } else {
                "{\"scores\":{\"t1\":0.5}}"
            };
            return self.run.call_again(vec![
                Message::assistant(text.clone()),
                Message::user(format!(
                    "Your answer could not be parsed. Answer again with only strict JSON of this shape: {shape}"
                )),
            ]);
        }
        let (kind, message) = if generation {
            (
                "thoughts_parse_failed",
                "could not read thoughts from the model's answer",
            )
        } else {
            (
                "scores_parse_failed",
                "could not read scores from the model's answer",
            )
        };
        self.run.fail(
            error_value(kind, message, json!({"answer": text})),
            Termination::Error,
        )
    }

    fn best_leaf(&self) -> Option<usize> {
        self.nodes
            .iter()
            .filter(|n| n.children.is_empty() && n.score.is_some())
            .max_by(|a, b| {
                a.score
                    .unwrap_or(0.0)
                    .total_cmp(&b.score.unwrap_or(0.0))
                    .then(b.id.cmp(&a.id))
            })
            .map(|n| n.id)
    }

    fn finish(&mut self, winner: Option<usize>, termination: Termination) -> Step {
        let Some(id) = winner.or_else(|| self.best_leaf()) else {
            return self.run.fail(
                error_value(
                    "no_solution_found",
                    "no scored thought to answer with",
                    json!({}),
                ),
                Termination::Error,
            );
        };
        self.solution_path = self.path(id).iter().map(|n| n.id).collect();
        let answer = self.nodes[id].content.clone();
        self.run.complete(Value::String(answer), termination)
    }

    /// The best `k` scored leaves, best first.
    pub fn top_leaves(&self, k: usize) -> Vec<&Node> {
        let mut leaves: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| n.children.is_empty() && n.score.is_some())
            .collect();
        leaves.sort_by(|a, b| {
            b.score
                .unwrap_or(0.0)
                .total_cmp(&a.score.unwrap_or(0.0))
                .then(a.id.cmp(&b.id))
        });
        leaves.truncate(k);
        leaves
    }

    fn on_scores(&mut self, config: &TotConfig, scores: Vec<f64>) -> Step {
        let parent = self.current;
        let depth = self.nodes[parent].depth + 1;
        let room = config.max_nodes.saturating_sub(self.nodes.len());
        let mut children = Vec::new();
        for (content, score) in std::mem::take(&mut self.pending)
            .into_iter()
            .zip(scores)
            .take(room)
        {
            let id = self.nodes.len();
            self.nodes.push(Node {
                id,
                parent: Some(parent),
                content,
                score: Some(score),
                children: Vec::new(),
                depth,
            });
            children.push(id);
        }
        self.nodes[parent].children = children.clone();
        let best = self
            .nodes
            .iter()
            .filter_map(|n| n.score)
            .fold(0.0_f64, f64::max);
        self.recent_best_scores.push(best);
        if self.nodes.len() >= config.max_nodes {
            return self.finish(None, Termination::MaxNodes);
        }
        if depth >= config.min_depth {
            let winner = children
                .iter()
                .copied()
                .filter(|&c| self.nodes[c].score.unwrap_or(0.0) >= config.early_success_threshold)
                .max_by(|&a, &b| {
                    self.nodes[a]
                        .score
                        .unwrap_or(0.0)
                        .total_cmp(&self.nodes[b].score.unwrap_or(0.0))
                        .then(b.cmp(&a))
                });
            if winner.is_some() {
                return self.finish(winner, Termination::Threshold);
            }
        }
        let window = config.convergence_window.max(1);
        if self.recent_best_scores.len() > window {
            let n = self.recent_best_scores.len();
            let gain = self.recent_best_scores[n - 1] - self.recent_best_scores[n - 1 - window];
            if gain < config.min_score_improvement {
                return self.finish(None, Termination::Converged);
            }
        }
        if depth >= config.max_depth {
            return self.finish(None, Termination::MaxDepth);
        }
        match config.traversal {
            Traversal::Bfs => self.frontier.extend(children),
            Traversal::Dfs => {
                let mut f = children;
                f.append(&mut self.frontier);
                self.frontier = f;
            }
            Traversal::BestFirst => {
                self.frontier.extend(children);
                let nodes = &self.nodes;
                self.frontier.sort_by(|&a, &b| {
                    nodes[b]
                        .score
                        .unwrap_or(0.0)
                        .total_cmp(&nodes[a].score.unwrap_or(0.0))
                        .then(a.cmp(&b))
                });
                if let Some(w) = config.beam_width {
                    self.frontier.truncate(w.max(1));
                }
            }
        }
        if self.frontier.is_empty() {
            return self.finish(None, Termination::MaxDepth);
        }
        self.current = self.frontier.remove(0);
        self.generate(config)
    }
}

impl Machine for Tot {
    type Config = TotConfig;

    fn name(_config: &TotConfig) -> &'static str {
        "tot"
    }

    fn default_config() -> TotConfig {
        TotConfig::default()
    }

    fn run(&self) -> &Run {
        &self.run
    }

    fn run_mut(&mut self) -> &mut Run {
        &mut self.run
    }

    fn max_tool_rounds(config: &TotConfig) -> u32 {
        config.max_tool_rounds
    }

    fn begin(&mut self, config: &TotConfig) -> Vec<Step> {
        let run = std::mem::take(&mut self.run);
        *self = Tot {
            nodes: vec![Node {
                content: run.query.clone(),
                ..Node::default()
            }],
            run,
            top_k: config.top_k,
            ..Tot::default()
        };
        vec![self.generate(config)]
    }

    fn on_answer(&mut self, config: &TotConfig, text: String) -> Vec<Step> {
        let step = match self.run.phase {
            Phase::Generating => {
                let (mut thoughts, mode) = parse_thoughts(&text);
                self.parser_mode = Some(mode);
                if thoughts.is_empty() {
                    self.repair_or_fail(config, text, true)
                } else {
                    thoughts.truncate(config.branching_factor.max(1));
                    self.pending = thoughts;
                    self.evaluate()
                }
            }
            Phase::Evaluating => {
                let ids: Vec<String> = (1..=self.pending.len()).map(|i| format!("t{i}")).collect();
                match parse_scores(&text, &ids) {
                    Some((scores, mode)) => {
                        self.parser_mode = Some(mode);
                        self.on_scores(config, scores)
                    }
                    None => {
                        self.parser_mode = Some(ParserMode::None);
                        self.repair_or_fail(config, text, false)
                    }
                }
            }
            _ => return Vec::new(),
        };
        vec![step]
    }

    fn details(&self) -> Map<String, Value> {
        let mut d = Map::new();
        let leaf = |n: &Node| {
            json!({
                "content": n.content,
                "score": n.score,
                "depth": n.depth,
                "path": self.path(n.id).iter().skip(1).map(|p| p.content.clone()).collect::<Vec<_>>(),
            })
        };
        d.insert("node_count".into(), self.nodes.len().into());
        d.insert(
            "solution_path".into(),
            json!(
                self.solution_path
                    .iter()
                    .skip(1)
                    .filter_map(|&i| self.nodes.get(i).map(|n| n.content.clone()))
                    .collect::<Vec<_>>()
            ),
        );
        d.insert(
            "best_score".into(),
            json!(
                self.solution_path
                    .last()
                    .and_then(|&i| self.nodes.get(i))
                    .and_then(|n| n.score)
            ),
        );
        d.insert(
            "candidates".into(),
            Value::Array(self.top_leaves(self.top_k).into_iter().map(leaf).collect()),
        );
        d.insert("parser_mode".into(), json!(self.parser_mode));
        d.insert("parse_retries".into(), json!(self.parse_retries));
        d.insert("frontier".into(), json!(self.frontier.len()));
        d
    }
}
