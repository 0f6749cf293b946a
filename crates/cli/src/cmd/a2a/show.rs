//! What `volcanic a2a` prints: text for people (states, the agent's question and the command that
//! answers it, artifact text as it streams, files saved to a folder), or with `--json` one JSON
//! value per line in the 1.0 shapes (one per event when streaming), for scripts.
//!
//! Writes to stdout go through [`Printer::out`], which ignores a closed pipe (`… | head`).

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use volcanic_a2a::client::Interface;

/// How a command that follows a task went: the exit code of the task's last state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Completed, waiting for input, or still running.
    Done,
    /// Failed, rejected or canceled.
    Failed,
}

impl Verdict {
    pub fn exit(self) -> crate::Exit {
        match self {
            Verdict::Done => crate::Exit::Success,
            Verdict::Failed => crate::Exit::Failed,
        }
    }

    fn of(state: &a2a::TaskState) -> Verdict {
        match state {
            a2a::TaskState::Failed | a2a::TaskState::Rejected | a2a::TaskState::Canceled => {
                Verdict::Failed
            }
            a2a::TaskState::Unspecified
            | a2a::TaskState::Submitted
            | a2a::TaskState::Working
            | a2a::TaskState::Completed
            | a2a::TaskState::InputRequired
            | a2a::TaskState::AuthRequired => Verdict::Done,
        }
    }
}

/// Prints answers for one command.
pub struct Printer {
    json: bool,
    url: String,
    out: Option<PathBuf>,
    answer_flags: String,
    /// Text was printed without its line's end (a streaming answer).
    open_line: bool,
    /// Artifacts whose text has been printed, so that a replacing update starts a new line.
    shown: HashSet<String>,
}

impl Printer {
    /// `out` is where files in artifacts are saved (text output only; JSON carries the bytes).
    /// `answer_flags` are the connection flags the command answering a question repeats.
    pub fn new(json: bool, url: &str, out: Option<PathBuf>, answer_flags: &str) -> Printer {
        Printer {
            json,
            url: url.to_owned(),
            out,
            answer_flags: answer_flags.to_owned(),
            open_line: false,
            shown: HashSet::new(),
        }
    }

    /// The card: the whole JSON, or its name, interfaces (the chosen one marked), skills and
    /// security schemes.
    pub fn card(&mut self, card: &Value, interfaces: Option<(&[Interface], Option<&Interface>)>) {
        if self.json {
            return self.line(&card.to_string());
        }
        let text = |key: &str| card.get(key).and_then(Value::as_str).unwrap_or("");
        self.line(&format!("{} (version {})", text("name"), text("version")));
        if !text("description").is_empty() {
            self.line(text("description"));
        }
        if let Some((interfaces, chosen)) = interfaces {
            self.line("interfaces:");
            for interface in interfaces {
                let mark = if Some(interface) == chosen { "*" } else { " " };
                let Interface { url, binding, version } = interface;
                self.line(&format!("  {mark} {} {} {url}", binding.as_str(), version.as_str()));
            }
        }
        let capabilities = card.get("capabilities").cloned().unwrap_or(Value::Null);
        let flags: Vec<&str> = ["streaming", "pushNotifications", "extendedAgentCard"]
            .into_iter()
            .filter(|flag| capabilities.get(*flag).and_then(Value::as_bool) == Some(true))
            .collect();
        if !flags.is_empty() {
            self.line(&format!("capabilities: {}", flags.join(", ")));
        }
        for skill in card.get("skills").and_then(Value::as_array).into_iter().flatten() {
            let field = |key: &str| skill.get(key).and_then(Value::as_str).unwrap_or("");
            self.line(&format!("skill {}: {}", field("name"), field("description")));
        }
        if let Some(schemes) = card.get("securitySchemes").and_then(Value::as_object) {
            for (name, scheme) in schemes {
                self.line(&format!("auth {name}: {}", describe_scheme(scheme)));
            }
        }
    }

    /// A blocking send's answer.
    pub fn send_response(&mut self, response: &a2a::SendMessageResponse) -> Verdict {
        match response {
            a2a::SendMessageResponse::Task(task) if !self.json => self.task(task),
            a2a::SendMessageResponse::Message(message) if !self.json => {
                self.message(message);
                Verdict::Done
            }
            a2a::SendMessageResponse::Task(task) => {
                self.value(response);
                Verdict::of(&task.status.state)
            }
            a2a::SendMessageResponse::Message(_) => {
                self.value(response);
                Verdict::Done
            }
        }
    }

    /// A task: its state line, its status message (the question, when it waits for input), its
    /// artifacts.
    pub fn task(&mut self, task: &a2a::Task) -> Verdict {
        if self.json {
            self.value(task);
            return Verdict::of(&task.status.state);
        }
        self.line(&format!(
            "{} · task {} · context {}",
            state_name(&task.status.state),
            task.id,
            task.context_id
        ));
        self.status(&task.id, &task.context_id, &task.status);
        for artifact in task.artifacts.iter().flatten() {
            self.parts(&task.id, &artifact.artifact_id, &artifact.parts);
            self.end_line();
        }
        Verdict::of(&task.status.state)
    }

    /// One page of ListTasks.
    pub fn task_list(&mut self, page: &a2a::ListTasksResponse) {
        if self.json {
            return self.value(page);
        }
        for task in &page.tasks {
            let when = task.status.timestamp.map(|t| t.to_rfc3339()).unwrap_or_default();
            let state = state_name(&task.status.state);
            self.line(&format!("{} {state:<14} context {} {when}", task.id, task.context_id));
        }
        self.line(&format!("{} of {} tasks", page.tasks.len(), page.total_size));
        if !page.next_page_token.is_empty() {
            self.line(&format!("next page: --page-token {}", page.next_page_token));
        }
    }

    /// One stream event, printed as it arrives.
    pub fn event(&mut self, event: &a2a::StreamResponse) -> Verdict {
        if self.json {
            self.value(event);
        }
        match event {
            a2a::StreamResponse::Task(task) if !self.json => {
                self.end_line();
                self.task(task)
            }
            a2a::StreamResponse::Task(task) => Verdict::of(&task.status.state),
            a2a::StreamResponse::Message(message) => {
                if !self.json {
                    self.end_line();
                    self.message(message);
                }
                Verdict::Done
            }
            a2a::StreamResponse::StatusUpdate(update) => {
                if !self.json {
                    self.end_line();
                    let state = state_name(&update.status.state);
                    match update.status.state {
                        a2a::TaskState::InputRequired => {
                            self.line(&format!("[{state}]"));
                            self.status(&update.task_id, &update.context_id, &update.status);
                        }
                        _ => match update.status.message.as_ref().map(text_of) {
                            Some(text) if !text.is_empty() => {
                                self.line(&format!("[{state}] {text}"))
                            }
                            _ => self.line(&format!("[{state}]")),
                        },
                    }
                }
                Verdict::of(&update.status.state)
            }
            a2a::StreamResponse::ArtifactUpdate(update) => {
                if !self.json {
                    let id = &update.artifact.artifact_id;
                    if update.append != Some(true) && self.shown.contains(id) {
                        self.end_line();
                    }
                    self.parts(&update.task_id, id, &update.artifact.parts);
                }
                Verdict::Done
            }
        }
    }

    pub fn push_config(&mut self, config: &a2a::TaskPushNotificationConfig) {
        if self.json {
            return self.value(config);
        }
        let id = config.id.as_deref().unwrap_or("(no id)");
        let mut line = format!("push config {id} · task {} → {}", config.task_id, config.url);
        if config.token.is_some() {
            line.push_str(" · token set");
        }
        if let Some(auth) = &config.authentication {
            line.push_str(&format!(" · auth {}", auth.scheme));
        }
        self.line(&line);
    }

    pub fn push_configs(&mut self, list: &a2a::ListTaskPushNotificationConfigsResponse) {
        if self.json {
            return self.value(list);
        }
        if list.configs.is_empty() {
            self.line("no push configs");
        }
        for config in &list.configs {
            self.push_config(config);
        }
    }

    pub fn deleted(&mut self, task: &str, id: &str) {
        if self.json {
            return self.line("{}");
        }
        self.line(&format!("deleted push config {id} of task {task}"));
    }

    /// Ends a line of streamed text, if one is open.
    pub fn end_line(&mut self) {
        if std::mem::take(&mut self.open_line) {
            self.out("\n");
        }
    }

    fn status(&mut self, task_id: &str, context_id: &str, status: &a2a::TaskStatus) {
        let text = status.message.as_ref().map(text_of).unwrap_or_default();
        match status.state {
            a2a::TaskState::InputRequired => {
                self.line(&format!("The agent asks: {text}"));
                self.line(&format!(
                    "Answer with: volcanic a2a send {} --task {task_id} --context {context_id}{} \"<your answer>\"",
                    self.url, self.answer_flags
                ));
            }
            _ if !text.is_empty() => self.line(&text),
            _ => {}
        }
    }

    fn message(&mut self, message: &a2a::Message) {
        let id = message.message_id.clone();
        self.parts(message.task_id.as_deref().unwrap_or("message"), &id, &message.parts);
        self.end_line();
    }

    /// Text streams inline; data is printed as JSON; files are saved (bytes) or named (URLs).
    fn parts(&mut self, task_id: &str, artifact_id: &str, parts: &[a2a::Part]) {
        for (index, part) in parts.iter().enumerate() {
            match &part.content {
                a2a::PartContent::Text(text) => {
                    self.out(text);
                    self.open_line = !text.ends_with('\n') && (self.open_line || !text.is_empty());
                    self.shown.insert(artifact_id.to_owned());
                }
                a2a::PartContent::Data(data) => {
                    self.end_line();
                    self.line(&data.to_string());
                }
                a2a::PartContent::Url(url) => {
                    self.end_line();
                    self.line(&format!("file: {url}"));
                }
                a2a::PartContent::Raw(bytes) => {
                    self.end_line();
                    let name =
                        part.filename.clone().unwrap_or_else(|| format!("{artifact_id}-{index}"));
                    let line = match self.save(task_id, &name, bytes) {
                        Ok(path) => format!("saved {} ({} bytes)", path.display(), bytes.len()),
                        Err(e) => format!("could not save {name}: {e}"),
                    };
                    self.line(&line);
                }
            }
        }
    }

    /// Saves a file into `<out>/<task id>/`, under a safe form of its name, never over another.
    fn save(&self, task_id: &str, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
        let Some(out) = &self.out else {
            return Err(std::io::Error::other("no folder to save files in"));
        };
        let folder = out.join(safe_name(task_id));
        std::fs::create_dir_all(&folder)?;
        let name = safe_name(name);
        let (stem, ext) = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => (stem.to_owned(), format!(".{ext}")),
            _ => (name.clone(), String::new()),
        };
        for n in 0..1000 {
            let candidate = if n == 0 { name.clone() } else { format!("{stem}-{n}{ext}") };
            let path = folder.join(candidate);
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    file.write_all(bytes)?;
                    return Ok(path);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(format!("too many files named {name} in {}", folder.display())))
    }

    fn value<T: Serialize>(&mut self, value: &T) {
        match serde_json::to_string(value) {
            Ok(text) => self.line(&text),
            Err(e) => self.line(&format!("{{\"error\": \"cannot print the answer: {e}\"}}")),
        }
    }

    fn line(&mut self, text: &str) {
        self.out(text);
        self.out("\n");
    }

    /// What an agent says must not drive the terminal: its control characters are shown, not
    /// sent (`volcanic_core::escape`). JSON output is unchanged by it: serde_json escapes control
    /// characters itself.
    fn out(&self, text: &str) {
        let text = volcanic_core::escape::printable(text);
        let mut stdout = std::io::stdout().lock();
        // A closed pipe (`volcanic a2a … | head`) is the reader's choice, not a failure.
        let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    }
}

/// The 0.3-style name of a state, as people read it (`input-required`).
pub fn state_name(state: &a2a::TaskState) -> &'static str {
    match state {
        a2a::TaskState::Unspecified => "unknown",
        a2a::TaskState::Submitted => "submitted",
        a2a::TaskState::Working => "working",
        a2a::TaskState::Completed => "completed",
        a2a::TaskState::Failed => "failed",
        a2a::TaskState::Canceled => "canceled",
        a2a::TaskState::InputRequired => "input-required",
        a2a::TaskState::Rejected => "rejected",
        a2a::TaskState::AuthRequired => "auth-required",
    }
}

fn text_of(message: &a2a::Message) -> String {
    let texts: Vec<&str> = message.parts.iter().filter_map(a2a::Part::as_text).collect();
    texts.join("\n")
}

/// A security scheme in a few words, from its 1.0 or 0.3 shape.
fn describe_scheme(scheme: &Value) -> String {
    let field =
        |outer: &str, key: &str| scheme.pointer(&format!("/{outer}/{key}")).and_then(Value::as_str);
    if let Some(name) = field("apiKeySecurityScheme", "name") {
        return format!("API key in the {name} header");
    }
    if let Some(kind) = field("httpAuthSecurityScheme", "scheme") {
        return format!("HTTP {kind}");
    }
    match scheme.get("type").and_then(Value::as_str) {
        Some("apiKey") => format!(
            "API key in the {} header",
            scheme.get("name").and_then(Value::as_str).unwrap_or("?")
        ),
        Some("http") => {
            format!("HTTP {}", scheme.get("scheme").and_then(Value::as_str).unwrap_or("?"))
        }
        Some(other) => other.to_owned(),
        None => scheme.as_object().and_then(|m| m.keys().next().cloned()).unwrap_or_default(),
    }
}

/// A file name that stays inside its folder: the last path component, without control
/// characters, never empty, `.` or `..`.
fn safe_name(name: &str) -> String {
    let last =
        Path::new(name).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let clean: String = last
        .chars()
        .map(|c| if c.is_control() || c == '/' || c == '\\' { '_' } else { c })
        .collect();
    let clean = clean.trim_start_matches('.').to_owned();
    if clean.is_empty() { "file".to_owned() } else { clean }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_name_table() {
        let cases = [
            ("report.pdf", "report.pdf"),
            ("../../etc/passwd", "passwd"),
            ("..", "file"),
            ("", "file"),
            (".hidden", "hidden"),
            ("a\nb.txt", "a_b.txt"),
        ];
        for (given, expected) in cases {
            assert_eq!(safe_name(given), expected, "{given:?}");
        }
    }
}
