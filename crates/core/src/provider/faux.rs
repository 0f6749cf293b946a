//! The Faux provider: deterministic, offline, scripted by the conversation itself.
//!
//! The contract (ARCHITECTURE.md, "The Faux provider"):
//! - No directive: one answer `echo: <latest user text>`, streamed in a few chunks.
//! - A line `faux> {"steps": [...]}` in the latest user message scripts the run; each model call
//!   takes the next step: `{"text", "chunk"?, "delay_ms"?}`, `{"tool", "args"}`,
//!   `{"calls": [{"tool", "args"}, ...]}`, `{"error"}`, `{"sleep_ms"}` (a wait before the next
//!   step, within the same call), `{"usage": {"input", "output"}}` (the token counts the next
//!   answer reports; otherwise a length-based count). A text step directly followed by a tool step is one answer
//!   (text, then the calls), so text ends the run only as the last step. When the steps run out
//!   the answer is `done`.
//! - A script file (`--faux-script`) gives `{"rules": [{"match": REGEX, "steps": [...]}],
//!   "default": {"steps": [...]}, "summary": {"steps": [...]}}` for user messages without a
//!   directive (`summary`: for summary calls, below).
//! - A summary call (the session's compaction, recognised by its system prompt) is answered with
//!   a deterministic summary of the transcript it was sent (its message count, every line that
//!   starts with `remember:`, the first lines of the latest user messages); a directive after
//!   the transcript (the owner's `/compact` instruction) or the script's `summary` steps answer
//!   it instead (an `error` step fails it, `{"text": ""}` makes it empty).
//! - With a context window ([`FauxProvider::with_context_window`]), a request of more input
//!   tokens than that (counted as its usage is) fails as a context overflow, in Anthropic's words.
//!
//! The provider keeps no state between calls: the step to take is the number of assistant answers
//! after the latest user message, so it behaves the same after a resume. Every request is recorded
//! for tests.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use regex::Regex;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Delta, DeltaSink, ModelRequest, Provider, ProviderError, ProviderErrorKind};
use crate::message::{AssistantBlock, AssistantMessage, Message, StopReason, ToolCall, Usage};

/// The prefix of a directive line.
pub const DIRECTIVE_PREFIX: &str = "faux>";

/// One scripted step.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A text answer in chunks of `chunk` characters (0 = whole), `delay` before each chunk.
    Text { text: String, chunk: usize, delay: Duration },
    /// One or more tool calls in one answer.
    Calls(Vec<(String, Value)>),
    /// The provider fails with this message.
    Error(String),
    /// A wait before the next step.
    Sleep(Duration),
    /// The token counts the next answer reports instead of Faux's estimate.
    Usage { input: u64, output: u64 },
}

/// A list of steps.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Steps(pub Vec<Step>);

/// A `--faux-script` file: rules tried in order on the latest user text, then a default.
#[derive(Debug, Clone, Default)]
pub struct FauxScript {
    rules: Vec<(Regex, Steps)>,
    default: Option<Steps>,
    /// How summary calls are answered instead of Faux's own summary.
    summary: Option<Steps>,
}

impl FauxScript {
    /// Parses a script file's JSON.
    ///
    /// # Errors
    /// A message naming the part of the script that is wrong.
    pub fn parse(json: &str) -> Result<Self, String> {
        let value: Value =
            serde_json::from_str(json).map_err(|e| format!("not valid JSON: {e}"))?;
        let obj = value.as_object().ok_or("the script must be a JSON object")?;
        let mut script = FauxScript::default();
        if let Some(rules) = obj.get("rules") {
            let rules = rules.as_array().ok_or("\"rules\" must be an array")?;
            for (i, rule) in rules.iter().enumerate() {
                let pattern = rule
                    .get("match")
                    .and_then(Value::as_str)
                    .ok_or_else(|| format!("rules[{i}]: \"match\" must be a string"))?;
                let regex = Regex::new(pattern).map_err(|e| format!("rules[{i}].match: {e}"))?;
                let steps = parse_steps(rule).map_err(|e| format!("rules[{i}]: {e}"))?;
                script.rules.push((regex, steps));
            }
        }
        if let Some(default) = obj.get("default") {
            script.default = Some(parse_steps(default).map_err(|e| format!("default: {e}"))?);
        }
        if let Some(summary) = obj.get("summary") {
            script.summary = Some(parse_steps(summary).map_err(|e| format!("summary: {e}"))?);
        }
        Ok(script)
    }

    fn steps_for(&self, text: &str) -> Option<&Steps> {
        self.rules
            .iter()
            .find(|(re, _)| re.is_match(text))
            .map(|(_, s)| s)
            .or(self.default.as_ref())
    }
}

/// Parses `{"steps": [...]}`.
///
/// # Errors
/// A message naming the step that is wrong.
pub fn parse_steps(value: &Value) -> Result<Steps, String> {
    let steps =
        value.get("steps").and_then(Value::as_array).ok_or("expected {\"steps\": [...]}")?;
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| parse_step(s).map_err(|e| format!("steps[{i}]: {e}")))
        .collect::<Result<_, _>>()
        .map(Steps)
}

fn parse_step(step: &Value) -> Result<Step, String> {
    let obj = step.as_object().ok_or("a step must be an object")?;
    let millis = |key: &str| -> Result<Duration, String> {
        match obj.get(key) {
            None => Ok(Duration::ZERO),
            Some(v) => v
                .as_u64()
                .map(Duration::from_millis)
                .ok_or(format!("\"{key}\" must be a whole number")),
        }
    };
    if let Some(text) = obj.get("text") {
        let text = text.as_str().ok_or("\"text\" must be a string")?.to_string();
        let chunk = match obj.get("chunk") {
            None => 0,
            Some(v) => v.as_u64().ok_or("\"chunk\" must be a whole number")? as usize,
        };
        return Ok(Step::Text { text, chunk, delay: millis("delay_ms")? });
    }
    if let Some(tool) = obj.get("tool") {
        return Ok(Step::Calls(vec![parse_call(tool, obj.get("args"))?]));
    }
    if let Some(calls) = obj.get("calls") {
        let calls = calls.as_array().ok_or("\"calls\" must be an array")?;
        let calls = calls
            .iter()
            .map(|c| parse_call(c.get("tool").unwrap_or(&Value::Null), c.get("args")))
            .collect::<Result<Vec<_>, _>>()?;
        if calls.is_empty() {
            return Err("\"calls\" must not be empty".into());
        }
        return Ok(Step::Calls(calls));
    }
    if let Some(error) = obj.get("error") {
        return Ok(Step::Error(error.as_str().ok_or("\"error\" must be a string")?.to_string()));
    }
    if obj.contains_key("sleep_ms") {
        return Ok(Step::Sleep(millis("sleep_ms")?));
    }
    if let Some(usage) = obj.get("usage") {
        let count = |key: &str| {
            usage
                .get(key)
                .and_then(Value::as_u64)
                .ok_or(format!("\"usage\" must be {{\"input\": N, \"output\": N}} (\"{key}\")"))
        };
        return Ok(Step::Usage { input: count("input")?, output: count("output")? });
    }
    Err("expected one of \"text\", \"tool\", \"calls\", \"error\", \"sleep_ms\", \"usage\"".into())
}

fn parse_call(tool: &Value, args: Option<&Value>) -> Result<(String, Value), String> {
    let name = tool.as_str().ok_or("\"tool\" must be a string")?.to_string();
    let args = args.cloned().unwrap_or_else(|| Value::Object(Default::default()));
    Ok((name, args))
}

/// Finds the directive line in a user message.
///
/// # Errors
/// The directive is there but does not parse.
pub fn directive(text: &str) -> Option<Result<Steps, String>> {
    let line = text.lines().find_map(|l| l.trim_start().strip_prefix(DIRECTIVE_PREFIX))?;
    Some(
        serde_json::from_str::<Value>(line.trim())
            .map_err(|e| format!("not valid JSON: {e}"))
            .and_then(|v| parse_steps(&v)),
    )
}

/// How many of the latest requests the provider keeps for inspection.
pub const RECORDED_REQUESTS: usize = 256;

/// The deterministic provider.
#[derive(Default)]
pub struct FauxProvider {
    script: FauxScript,
    requests: Mutex<VecDeque<ModelRequest>>,
    /// Input tokens a request may have; more fails as a context overflow.
    context_window: Option<u64>,
}

impl FauxProvider {
    /// A Faux provider with no script file: directives, else echo.
    pub fn new() -> Self {
        FauxProvider::default()
    }

    /// A Faux provider with a `--faux-script`.
    pub fn with_script(script: FauxScript) -> Self {
        FauxProvider { script, ..FauxProvider::default() }
    }

    /// Simulates a context window of `tokens`: a request whose input (counted as Faux reports
    /// usage, about four characters a token) is larger fails with a context-overflow error.
    #[must_use]
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// The requests received so far, oldest first (at most the latest [`RECORDED_REQUESTS`]).
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner).iter().cloned().collect()
    }

    /// What the next answer to `request` is.
    fn plan(&self, request: &ModelRequest) -> Result<Answer, String> {
        let user = request.latest_user_text().unwrap_or("");
        if request.system == crate::session::SUMMARY_SYSTEM_PROMPT {
            return self.plan_summary(user);
        }
        let answered = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m, Message::User { .. }))
            .filter(|m| matches!(m, Message::Assistant(_)))
            .count();
        let steps = match directive(user) {
            Some(parsed) => parsed.map_err(|e| format!("faux: invalid directive: {e}"))?,
            None => match self.script.steps_for(user) {
                Some(steps) => steps.clone(),
                None if answered > 0 => Steps::default(),
                None => {
                    let text = format!("echo: {user}");
                    let chunk = text.chars().count().div_ceil(3).max(1);
                    Steps(vec![Step::Text { text, chunk, delay: Duration::ZERO }])
                }
            },
        };
        Ok(answers(steps).into_iter().nth(answered).unwrap_or_default())
    }

    /// The answer to a summary call whose request text is `text`.
    fn plan_summary(&self, text: &str) -> Result<Answer, String> {
        let (transcript, after) =
            text.rsplit_once(crate::session::compact::TRANSCRIPT_END).unwrap_or((text, ""));
        let steps = match directive(after) {
            Some(parsed) => Some(parsed.map_err(|e| format!("faux: invalid directive: {e}"))?),
            None => self.script.summary.clone(),
        };
        Ok(match steps {
            Some(steps) => answers(steps).into_iter().next().unwrap_or_default(),
            None => Answer {
                text: Some((summarize(transcript), 0, Duration::ZERO)),
                ..Answer::default()
            },
        })
    }
}

/// Most `remember:` lines a Faux summary keeps (the latest).
const SUMMARY_FACTS: usize = 20;

/// User messages whose first line a Faux summary quotes (the latest).
const SUMMARY_REQUESTS: usize = 3;

/// Faux's summary of a transcript: how many messages it holds, every `remember:` line (the
/// previous summary's included, so facts carry over from one compaction to the next), and the
/// first lines of the latest user messages.
fn summarize(transcript: &str) -> String {
    let mut messages = 0;
    let mut facts: Vec<String> = Vec::new();
    let mut requests: Vec<String> = Vec::new();
    let mut after_user = false;
    for line in transcript.lines() {
        if let Some(header) = line.strip_prefix("### ") {
            if !header.starts_with("summary of") {
                messages += 1;
            }
            after_user = header == "user";
            continue;
        }
        if std::mem::take(&mut after_user) {
            requests.push(line.chars().take(80).collect());
        }
        let fact = line.trim_start_matches(['-', ' ']);
        if fact.to_lowercase().starts_with("remember:") {
            facts.retain(|f| f != fact);
            facts.push(fact.to_string());
        }
    }
    let mut out = format!("Faux summary of {messages} messages.\n");
    if !facts.is_empty() {
        out.push_str("Facts:\n");
        for fact in &facts[facts.len().saturating_sub(SUMMARY_FACTS)..] {
            out.push_str(&format!("- {fact}\n"));
        }
    }
    if !requests.is_empty() {
        out.push_str("Latest requests:\n");
        for request in &requests[requests.len().saturating_sub(SUMMARY_REQUESTS)..] {
            out.push_str(&format!("- {request}\n"));
        }
    }
    out
}

/// One model call's worth of steps.
#[derive(Debug, Clone, PartialEq, Default)]
struct Answer {
    wait: Duration,
    /// Text, chunk size (0 = whole), delay before each chunk.
    text: Option<(String, usize, Duration)>,
    calls: Vec<(String, Value)>,
    error: Option<String>,
    /// Input and output tokens to report (a `usage` step), else Faux's estimate.
    usage: Option<(u64, u64)>,
}

/// Groups steps into answers: sleeps add to the wait of the next answer, and a text step directly
/// followed by a tool step is one answer ("let me check" plus the call), so a text step ends the
/// run only when it is the last one.
fn answers(steps: Steps) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut wait = Duration::ZERO;
    let mut usage = None;
    let mut steps = steps.0.into_iter().peekable();
    while let Some(step) = steps.next() {
        match step {
            Step::Sleep(d) => wait = wait.saturating_add(d),
            Step::Usage { input, output } => usage = Some((input, output)),
            Step::Text { text, chunk, delay } => {
                let calls = match steps.peek() {
                    Some(Step::Calls(_)) => match steps.next() {
                        Some(Step::Calls(calls)) => calls,
                        Some(
                            Step::Text { .. }
                            | Step::Error(_)
                            | Step::Sleep(_)
                            | Step::Usage { .. },
                        )
                        | None => Vec::new(),
                    },
                    Some(
                        Step::Text { .. } | Step::Error(_) | Step::Sleep(_) | Step::Usage { .. },
                    )
                    | None => Vec::new(),
                };
                let text = Some((text, chunk, delay));
                out.push(Answer { wait, text, calls, error: None, usage: usage.take() });
                wait = Duration::ZERO;
            }
            Step::Calls(calls) => {
                out.push(Answer { wait, text: None, calls, error: None, usage: usage.take() });
                wait = Duration::ZERO;
            }
            Step::Error(error) => {
                let calls = Vec::new();
                out.push(Answer {
                    wait,
                    text: None,
                    calls,
                    error: Some(error),
                    usage: usage.take(),
                });
                wait = Duration::ZERO;
            }
        }
    }
    // Trailing sleeps wait before the final `done`, which reports a trailing usage.
    if !wait.is_zero() || usage.is_some() {
        out.push(Answer { wait, usage, ..Answer::default() });
    }
    out
}

#[async_trait::async_trait]
impl Provider for FauxProvider {
    fn name(&self) -> &str {
        "faux"
    }

    fn default_model(&self) -> &str {
        "faux"
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        sink: DeltaSink<'_>,
        _cancel: &CancellationToken,
    ) -> Result<AssistantMessage, ProviderError> {
        {
            let mut requests = self.requests.lock().unwrap_or_else(PoisonError::into_inner);
            if requests.len() >= RECORDED_REQUESTS {
                requests.pop_front();
            }
            requests.push_back(request.clone());
        }
        if let Some(window) = self.context_window {
            let input = super::estimate_input_tokens(request);
            if input > window {
                return Err(ProviderError::new(
                    ProviderErrorKind::ContextOverflow,
                    format!("prompt is too long: {input} tokens > {window} maximum"),
                ));
            }
        }
        let answer =
            self.plan(request).map_err(|e| ProviderError::new(ProviderErrorKind::Other, e))?;
        if !answer.wait.is_zero() {
            tokio::time::sleep(answer.wait).await;
        }
        if let Some(error) = answer.error {
            return Err(ProviderError::new(ProviderErrorKind::Other, error));
        }
        let (text, chunk, delay) = match answer.text {
            Some(text) => text,
            None if answer.calls.is_empty() => ("done".to_string(), 0, Duration::ZERO),
            None => (String::new(), 0, Duration::ZERO),
        };
        let mut content = Vec::new();
        if !text.is_empty() {
            let chars: Vec<char> = text.chars().collect();
            let size = if chunk == 0 { chars.len() } else { chunk };
            for piece in chars.chunks(size) {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                sink(Delta::Text(piece.iter().collect()));
            }
            content.push(AssistantBlock::Text { text: text.clone() });
        }
        let stop_reason =
            if answer.calls.is_empty() { StopReason::Stop } else { StopReason::ToolUse };
        for (name, args) in answer.calls {
            let id = format!("faux_{}", uuid::Uuid::now_v7().simple());
            content.push(AssistantBlock::ToolCall(ToolCall { id, name, args }));
        }
        let mut message = AssistantMessage {
            content,
            stop_reason,
            error: None,
            usage: Usage::default(),
            provider: "faux".into(),
            model: request.model.clone(),
        };
        // Faux reports usage like a real backend: the scripted counts, else the length-based
        // estimate (deterministic for the same conversation), as reported figures.
        message.usage = match answer.usage {
            Some((input, output)) => {
                Usage { input_tokens: input, output_tokens: output, ..Usage::default() }
            }
            None => Usage { estimated: false, ..super::estimate_usage(request, &message) },
        };
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directive_parses_every_step_kind() {
        let text = "hello\nfaux> {\"steps\":[{\"text\":\"hi\",\"chunk\":1,\"delay_ms\":5},{\"tool\":\"bash\",\"args\":{\"command\":\"ls\"}},{\"calls\":[{\"tool\":\"read\",\"args\":{\"path\":\"a\"}},{\"tool\":\"ls\"}]},{\"error\":\"boom\"},{\"sleep_ms\":7}]}";
        let steps = directive(text).unwrap().unwrap();
        assert_eq!(
            steps.0,
            vec![
                Step::Text { text: "hi".into(), chunk: 1, delay: Duration::from_millis(5) },
                Step::Calls(vec![("bash".into(), serde_json::json!({"command": "ls"}))]),
                Step::Calls(vec![
                    ("read".into(), serde_json::json!({"path": "a"})),
                    ("ls".into(), serde_json::json!({}))
                ]),
                Step::Error("boom".into()),
                Step::Sleep(Duration::from_millis(7)),
            ]
        );
    }

    #[test]
    fn bad_directive_names_the_step() {
        let err = directive("faux> {\"steps\":[{\"nope\":1}]}").unwrap().unwrap_err();
        assert!(err.starts_with("steps[0]: expected one of"), "{err}");
        assert!(directive("no directive here").is_none());
    }

    #[test]
    fn script_rules_match_in_order_then_default() {
        let script = FauxScript::parse(
            r#"{"rules":[{"match":"^weather","steps":[{"text":"sunny"}]},{"match":"weather","steps":[{"text":"second"}]}],"default":{"steps":[{"text":"fallback"}]}}"#,
        )
        .unwrap();
        let first = |t: &str| match &script.steps_for(t).unwrap().0[0] {
            Step::Text { text, .. } => text.clone(),
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(first("weather today"), "sunny");
        assert_eq!(first("the weather"), "second");
        assert_eq!(first("anything"), "fallback");
        assert!(
            FauxScript::parse(r#"{"rules":[{"match":"(","steps":[]}]}"#)
                .unwrap_err()
                .starts_with("rules[0].match")
        );
    }
}
