//! Parsers of model output shared by the reasoning strategies: reasoning
//! steps and conclusions, JSON embedded in text, numbered lists, thought
//! scores. They never fail: malformed output gives empty or partial
//! results, and the strategies decide what that means.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One reasoning step of a chain of thought.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReasoningStep {
    /// Its number (as written, or its position for bullets).
    pub number: u64,
    /// Its text.
    pub content: String,
}

/// The conclusion markers, lowercase, longest first.
const CONCLUSION_MARKERS: [&str; 7] = [
    "final answer",
    "in conclusion",
    "conclusion",
    "therefore",
    "answer",
    "hence",
    "thus",
];

/// Steps and conclusion of a chain of thought.
///
/// * A `####` separator with text after it: the conclusion is that text
///   (without a leading conclusion marker), the steps come from the text
///   before it.
/// * Else the first line starting with a conclusion marker (`Conclusion`,
///   `Answer`, `Final Answer`, `Therefore`, `Thus`, `Hence`, `In
///   conclusion`; any case, markdown emphasis allowed, followed by `:`,
///   `,`, `-` or a space) starts the conclusion: that line without the
///   marker and every line after it.
/// * Steps: lines starting with `Step N:` / `N.` / `N)` / `N:` open a step
///   that runs until the next one; without numbered lines, bullet lines
///   (`-`, `*`, `•`) are the steps, numbered from 1. Empty steps are
///   dropped.
///
/// ```
/// use jido::ai::reasoning::parse::steps_and_conclusion;
///
/// let (steps, conclusion) = steps_and_conclusion(
///     "Step 1: 6 times 7 is 42.\nStep 2: Add 0.\nConclusion: 42",
/// );
/// assert_eq!(steps.len(), 2);
/// assert_eq!(steps[1].content, "Add 0.");
/// assert_eq!(conclusion.as_deref(), Some("42"));
/// ```
pub fn steps_and_conclusion(text: &str) -> (Vec<ReasoningStep>, Option<String>) {
    if let Some((before, after)) = text.split_once("####") {
        let after = after.trim();
        let after = strip_conclusion_marker(after).unwrap_or(after).trim();
        if !after.is_empty() {
            return (steps(before), Some(after.to_owned()));
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    let Some((index, rest)) = lines
        .iter()
        .enumerate()
        .find_map(|(i, line)| strip_conclusion_marker(line).map(|rest| (i, rest)))
    else {
        return (steps(text), None);
    };
    let mut conclusion = rest.trim().to_owned();
    for line in &lines[index + 1..] {
        conclusion.push('\n');
        conclusion.push_str(line);
    }
    let conclusion = conclusion.trim().to_owned();
    let content = lines[..index].join("\n");
    (
        steps(&content),
        (!conclusion.is_empty()).then_some(conclusion),
    )
}

/// The drafts of a chain of draft: the non-empty lines before the `####`
/// separator (or the first conclusion marker), without list markers,
/// numbered from 1.
///
/// ```
/// use jido::ai::reasoning::parse::drafts;
///
/// let d = drafts("17 sheep\n- all but 9 flee\n\n9 stay\n#### 9");
/// assert_eq!(d.iter().map(|s| s.content.as_str()).collect::<Vec<_>>(), ["17 sheep", "all but 9 flee", "9 stay"]);
/// ```
pub fn drafts(text: &str) -> Vec<ReasoningStep> {
    let body = text.split_once("####").map_or(text, |(before, _)| before);
    let mut out = Vec::new();
    for line in body.lines() {
        if strip_conclusion_marker(line).is_some() {
            break;
        }
        let content = step_marker(line)
            .map(|(_, rest)| rest)
            .or_else(|| bullet(line))
            .unwrap_or(line)
            .trim();
        if !content.is_empty() {
            out.push(ReasoningStep {
                number: out.len() as u64 + 1,
                content: content.to_owned(),
            });
        }
    }
    out
}

/// The rest of `line` after a conclusion marker, if it starts with one.
fn strip_conclusion_marker(line: &str) -> Option<&str> {
    let trimmed = line
        .trim_start()
        .trim_start_matches(['*', '_', '#'])
        .trim_start();
    let lower = trimmed.to_ascii_lowercase();
    let marker = CONCLUSION_MARKERS.iter().find(|m| lower.starts_with(**m))?;
    let rest = &trimmed[marker.len()..];
    match rest.chars().next() {
        None => Some(rest),
        Some(c) if c.is_alphanumeric() => None,
        Some(_) => Some(
            rest.trim_start_matches(['*', '_'])
                .trim_start()
                .trim_start_matches([':', ',', '-', '：'])
                .trim_start_matches(['*', '_'])
                .trim_start(),
        ),
    }
}

/// The step a line opens (`Step N:`, `N.`, `N)`, `N:`), with its number
/// and the rest of the line.
fn step_marker(line: &str) -> Option<(u64, &str)> {
    let t = line.trim_start();
    let t = match t.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("step ") => t[5..].trim_start(),
        _ => t,
    };
    let t = t.trim_start_matches(['*', '_']);
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let number: u64 = t[..digits].parse().ok()?;
    let rest = &t[digits..];
    let mut chars = rest.chars();
    match chars.next() {
        Some('.' | ':' | ')') => {
            let after = chars.as_str();
            if after.starts_with(|c: char| c.is_ascii_digit()) {
                return None;
            }
            Some((number, after.trim_start_matches(['*', '_']).trim()))
        }
        _ => None,
    }
}

fn bullet(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let rest = t
        .strip_prefix('-')
        .or_else(|| t.strip_prefix('*'))
        .or_else(|| t.strip_prefix('•'))?;
    rest.starts_with(char::is_whitespace).then(|| rest.trim())
}

/// The steps of `text` (see [`steps_and_conclusion`]).
pub fn steps(text: &str) -> Vec<ReasoningStep> {
    let mut out: Vec<ReasoningStep> = Vec::new();
    let mut open = false;
    let numbered = text.lines().any(|l| step_marker(l).is_some());
    for line in text.lines() {
        let opened = if numbered {
            step_marker(line)
        } else {
            bullet(line).map(|rest| (out.len() as u64 + 1, rest))
        };
        match opened {
            Some((number, rest)) => {
                out.push(ReasoningStep {
                    number,
                    content: rest.to_owned(),
                });
                open = true;
            }
            None if open && !line.trim().is_empty() => {
                if let Some(last) = out.last_mut() {
                    if !last.content.is_empty() {
                        last.content.push('\n');
                    }
                    last.content.push_str(line.trim());
                }
            }
            None => {}
        }
    }
    out.retain(|s| !s.content.is_empty());
    out
}

/// The first JSON object or array in `text`: the whole text, a fenced
/// code block, or the first balanced `{…}` / `[…]` that parses.
///
/// ```
/// use jido::ai::reasoning::parse::extract_json;
/// use serde_json::json;
///
/// let v = extract_json("Sure! ```json\n{\"scores\": {\"t1\": 0.8}}\n``` Hope it helps.");
/// assert_eq!(v, Some(json!({"scores": {"t1": 0.8}})));
/// assert_eq!(extract_json("no json here"), None);
/// ```
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str(trimmed) {
        return Some(v);
    }
    if let Some(start) = trimmed.find("```") {
        let body = &trimmed[start + 3..];
        let body = body.strip_prefix("json").unwrap_or(body);
        if let Some(end) = body.find("```")
            && let Ok(v @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str(body[..end].trim())
        {
            return Some(v);
        }
    }
    for (start, open) in trimmed.char_indices() {
        if open != '{' && open != '[' {
            continue;
        }
        if let Some(end) = balanced_end(&trimmed[start..])
            && let Ok(v) = serde_json::from_str::<Value>(&trimmed[start..start + end])
        {
            return Some(v);
        }
    }
    None
}

/// The byte length of the balanced bracket group at the start of `s`.
fn balanced_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + c.len_utf8());
                }
            }
            _ => {}
        }
    }
    None
}

/// How a parser read the model's output.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParserMode {
    /// Strict JSON (possibly inside other text).
    Json,
    /// The line-based fallback.
    Regex,
    /// Nothing usable.
    None,
}

/// Items of a numbered list (`1. …`, `2) …`, `Step 3: …`), continuation
/// lines included.
pub fn numbered_items(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        if let Some((_, rest)) = step_marker(line) {
            out.push(rest.to_owned());
            open = true;
        } else if open
            && !line.trim().is_empty()
            && let Some(last) = out.last_mut()
        {
            if !last.is_empty() {
                last.push(' ');
            }
            last.push_str(line.trim());
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Thoughts from a generation answer: JSON `{"thoughts": [{"content":
/// …}, …]}` (or a bare list, of objects or strings), else a numbered list.
///
/// ```
/// use jido::ai::reasoning::parse::{parse_thoughts, ParserMode};
///
/// let (t, mode) = parse_thoughts(r#"{"thoughts":[{"id":"t1","content":"Try 6*4"},{"id":"t2","content":"Try 8*3"}]}"#);
/// assert_eq!((t.len(), mode), (2, ParserMode::Json));
/// let (t, mode) = parse_thoughts("1. Try 6*4\n2. Try 8*3");
/// assert_eq!((t, mode), (vec!["Try 6*4".to_string(), "Try 8*3".to_string()], ParserMode::Regex));
/// assert_eq!(parse_thoughts("I cannot help").1, ParserMode::None);
/// ```
pub fn parse_thoughts(text: &str) -> (Vec<String>, ParserMode) {
    let from_list = |list: &Vec<Value>| -> Vec<String> {
        list.iter()
            .filter_map(|t| match t {
                Value::String(s) => Some(s.trim().to_owned()),
                Value::Object(o) => o
                    .get("content")
                    .or_else(|| o.get("thought"))
                    .and_then(Value::as_str)
                    .map(|s| s.trim().to_owned()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
            .collect()
    };
    let json = match extract_json(text) {
        Some(Value::Object(o)) => o
            .get("thoughts")
            .and_then(Value::as_array)
            .map(from_list)
            .unwrap_or_default(),
        Some(Value::Array(list)) => from_list(&list),
        _ => Vec::new(),
    };
    if !json.is_empty() {
        return (json, ParserMode::Json);
    }
    let items = numbered_items(text);
    if items.is_empty() {
        (items, ParserMode::None)
    } else {
        (items, ParserMode::Regex)
    }
}

/// A number in `[0, 1]` from JSON (a number or a numeric string).
fn score_of(v: &Value) -> Option<f64> {
    let f = match v {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        Value::Object(o) => return o.get("score").and_then(score_of),
        _ => return None,
    };
    f.is_finite().then(|| f.clamp(0.0, 1.0))
}

/// The leading number of `s` (`0.8`, `.75`, `1`), if any.
fn leading_number(s: &str) -> Option<f64> {
    let end = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map_or(s.len(), |(i, _)| i);
    let n = s[..end].trim_end_matches('.');
    if n.is_empty() {
        return None;
    }
    n.parse::<f64>().ok().filter(|f| f.is_finite())
}

/// Scores of thoughts `ids` (in order) from an evaluation answer: JSON
/// `{"scores": {"t1": 0.8, …}}` (keys: the ids, or positions `"1"`, …;
/// also a list of numbers), else lines `t1: 0.8` / `1. 0.8` / `1: 0.8`.
/// Scores are clamped to `[0, 1]`; a thought without one gets 0.5. `None`
/// when no score at all could be read.
///
/// ```
/// use jido::ai::reasoning::parse::{parse_scores, ParserMode};
///
/// let ids = ["t1".to_string(), "t2".to_string()];
/// let (s, mode) = parse_scores(r#"{"scores":{"t1":0.9,"t2":1.7}}"#, &ids).unwrap();
/// assert_eq!((s, mode), (vec![0.9, 1.0], ParserMode::Json));
/// let (s, mode) = parse_scores("t2: 0.4", &ids).unwrap();
/// assert_eq!((s, mode), (vec![0.5, 0.4], ParserMode::Regex));
/// assert!(parse_scores("they are all fine", &ids).is_none());
/// ```
pub fn parse_scores(text: &str, ids: &[String]) -> Option<(Vec<f64>, ParserMode)> {
    if let Some(json) = extract_json(text) {
        let map = match &json {
            Value::Object(o) => o.get("scores").unwrap_or(&json),
            other => other,
        };
        let scores: Vec<Option<f64>> = match map {
            Value::Object(o) => ids
                .iter()
                .enumerate()
                .map(|(i, id)| {
                    o.get(id)
                        .or_else(|| o.get(&(i + 1).to_string()))
                        .and_then(score_of)
                })
                .collect(),
            Value::Array(list) => ids
                .iter()
                .enumerate()
                .map(|(i, _)| list.get(i).and_then(score_of))
                .collect(),
            _ => Vec::new(),
        };
        if scores.iter().any(Option::is_some) {
            return Some((
                scores.into_iter().map(|s| s.unwrap_or(0.5)).collect(),
                ParserMode::Json,
            ));
        }
    }
    let mut scores: Vec<Option<f64>> = vec![None; ids.len()];
    for line in text.lines() {
        let t = line
            .trim()
            .trim_start_matches(['-', '*', ' '])
            .trim_start_matches(['*', '_']);
        let lower = t.to_ascii_lowercase();
        for (i, id) in ids.iter().enumerate() {
            let keys = [id.to_ascii_lowercase(), (i + 1).to_string()];
            for key in keys {
                let Some(rest) = lower.strip_prefix(&key) else {
                    continue;
                };
                let rest = rest.trim_start_matches(['*', '_']);
                let Some(rest) = rest.strip_prefix([':', '.', ')', '=']).map(str::trim_start)
                else {
                    continue;
                };
                let rest = rest.trim_start_matches(['*', '_']);
                let rest = rest.strip_prefix("score").unwrap_or(rest);
                let rest = rest.trim_start_matches([':', ' ', '=']);
                if let Some(f) = leading_number(rest) {
                    scores[i] = Some(f.clamp(0.0, 1.0));
                }
            }
        }
    }
    scores.iter().any(Option::is_some).then(|| {
        (
            scores.into_iter().map(|s| s.unwrap_or(0.5)).collect(),
            ParserMode::Regex,
        )
    })
}

/// The value after a `SCORE` marker (`Score: 0.8`, `**SCORE**: 0.8`, any
/// case), clamped to `[0, 1]`; `None` without one.
///
/// ```
/// use jido::ai::reasoning::parse::score_marker;
///
/// assert_eq!(score_marker("ISSUE: vague\n**SCORE**: 0.75"), Some(0.75));
/// assert_eq!(score_marker("score 3"), Some(1.0));
/// assert_eq!(score_marker("no verdict"), None);
/// ```
pub fn score_marker(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(pos) = lower[from..].find("score") {
        let at = from + pos + "score".len();
        let rest = lower[at..]
            .trim_start_matches(['*', '_'])
            .trim_start_matches([':', ' ', '=', '\t']);
        if let Some(f) = leading_number(rest) {
            return Some(f.clamp(0.0, 1.0));
        }
        from = at;
    }
    None
}

/// Items of lines marked `MARKER:` (any case, after an optional bullet or
/// emphasis), e.g. `ISSUE: …`.
pub fn marked_items(text: &str, markers: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line
            .trim()
            .trim_start_matches(['-', '*', '•', ' '])
            .trim_start_matches(['*', '_']);
        let upper = t.to_ascii_uppercase();
        for marker in markers {
            if let Some(rest) = upper.strip_prefix(marker) {
                let rest_len = rest.len();
                let original = &t[t.len() - rest_len..];
                let original = original.trim_start_matches(['*', '_']);
                if let Some(item) = original.strip_prefix(':') {
                    let item = item.trim();
                    if !item.is_empty() && !out.iter().any(|o: &String| o == item) {
                        out.push(item.to_owned());
                    }
                }
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbered_steps_with_continuations_and_a_conclusion() {
        let text = "Let me think.\n1. First, 6 * 7.\n   That is 42.\n2) Then nothing.\n\nTherefore, the answer is 42.\nDone.";
        let (steps, conclusion) = steps_and_conclusion(text);
        assert_eq!(
            steps,
            vec![
                ReasoningStep {
                    number: 1,
                    content: "First, 6 * 7.\nThat is 42.".into()
                },
                ReasoningStep {
                    number: 2,
                    content: "Then nothing.".into()
                },
            ]
        );
        assert_eq!(conclusion.as_deref(), Some("the answer is 42.\nDone."));
    }

    #[test]
    fn markers_need_a_word_boundary_and_allow_emphasis() {
        assert_eq!(strip_conclusion_marker("Answering the question"), None);
        assert_eq!(strip_conclusion_marker("Thusly"), None);
        assert_eq!(strip_conclusion_marker("**Final Answer:** 42"), Some("42"));
        assert_eq!(strip_conclusion_marker("Hence - 7"), Some("7"));
        let (_, c) = steps_and_conclusion("Step 1: x\nFinal answer: 9");
        assert_eq!(c.as_deref(), Some("9"));
    }

    #[test]
    fn hash_separator_wins_and_an_empty_one_is_ignored() {
        let (steps, c) = steps_and_conclusion("- 6*7\n- =42\n#### 42");
        assert_eq!(c.as_deref(), Some("42"));
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[1].number, 2);
        let (_, c) = steps_and_conclusion("draft ####   \nAnswer: 5");
        assert_eq!(c.as_deref(), Some("5"));
    }

    #[test]
    fn malformed_text_gives_no_steps_and_no_conclusion() {
        assert_eq!(steps_and_conclusion(""), (vec![], None));
        assert_eq!(
            steps_and_conclusion("just prose, 1.5 apples"),
            (vec![], None)
        );
        assert_eq!(steps("1.5 apples\n2.25 pears"), vec![]);
    }

    #[test]
    fn json_extraction_handles_braces_in_strings_and_bad_candidates() {
        assert_eq!(
            extract_json(r#"x {not json} then {"a": "}{", "b": [1]} y"#),
            Some(json!({"a": "}{", "b": [1]}))
        );
        assert_eq!(extract_json("{\"a\": 1"), None);
    }

    #[test]
    fn scores_by_position_and_list() {
        let ids = ["t1".to_string(), "t2".to_string(), "t3".to_string()];
        assert_eq!(
            parse_scores(r#"{"scores": {"1": 0.2, "3": "0.9"}}"#, &ids),
            Some((vec![0.2, 0.5, 0.9], ParserMode::Json))
        );
        assert_eq!(
            parse_scores("[0.1, 0.2, -3]", &ids),
            Some((vec![0.1, 0.2, 0.0], ParserMode::Json))
        );
        assert_eq!(
            parse_scores("1. 0.7\n2) 0.3\n**t3**: score 0.95", &ids),
            Some((vec![0.7, 0.3, 0.95], ParserMode::Regex))
        );
        assert_eq!(parse_scores(r#"{"scores": "high"}"#, &ids), None);
    }

    #[test]
    fn marked_items_keep_original_case_and_dedupe() {
        let text = "- ISSUE: Missing units\n* issue: Missing units\nSUGGESTION: Add units\n**STRENGTH**: clear";
        assert_eq!(marked_items(text, &["ISSUE"]), vec!["Missing units"]);
        assert_eq!(marked_items(text, &["SUGGESTION"]), vec!["Add units"]);
        assert_eq!(marked_items(text, &["STRENGTH"]), vec!["clear"]);
    }
}
