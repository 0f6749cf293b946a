//! A text-mode `volcanic a2a send` that waits for the task: it follows the task's events to
//! learn its id as soon as the agent names it, says on stderr how to follow it elsewhere (a
//! spinner while it waits, on a terminal), and prints the task as it ended, as a blocking send
//! prints it. An agent whose card does not offer streaming, and a message that continues a task,
//! get a blocking send, with the spinner.

use std::io::{IsTerminal as _, Write as _};

use futures_util::StreamExt;
use indicatif::ProgressBar;
use volcanic_a2a::client::{AgentCard, Client};

use super::show::{Printer, Verdict};
use super::{Failure, failure};

/// Sends `request` and waits for its task to end or to ask something; prints it.
pub async fn send(
    card: &AgentCard,
    client: &Client,
    request: &a2a::SendMessageRequest,
    printer: &mut Printer,
    url: &str,
    flags: &str,
) -> Result<Verdict, Failure> {
    let mut waiting = Waiting::new();
    let streams = card
        .json
        .pointer("/capabilities/streaming")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    // A message that continues a task names its id already, so there is nothing to learn from
    // the events; and agents built on the official JS SDK refuse a stream of a continued task
    // (it opens with the artifact update, not the task), so it goes as a blocking send.
    let continues = request.message.task_id.as_deref().is_some_and(|id| !id.is_empty());
    if !streams || continues {
        waiting.spin(match request.message.task_id.as_deref() {
            Some(task) if continues => format!("task {task}: waiting for the agent's answer…"),
            _ => "waiting for the agent's answer…".to_owned(),
        });
        let response = client.send(request).await;
        waiting.clear();
        return Ok(printer.send_response(&response.map_err(failure)?));
    }
    let mut events = client.send_stream(request).await.map_err(failure)?;
    let mut task_id: Option<String> = None;
    let mut message = None;
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                waiting.clear();
                return Err(failure(error));
            }
        };
        let id = match &event {
            a2a::StreamResponse::Task(task) => Some(&task.id),
            a2a::StreamResponse::StatusUpdate(update) => Some(&update.task_id),
            a2a::StreamResponse::ArtifactUpdate(update) => Some(&update.task_id),
            a2a::StreamResponse::Message(answer) => {
                message = Some(answer.clone());
                answer.task_id.as_ref()
            }
        };
        if let (None, Some(id)) = (&task_id, id) {
            waiting.line(&format!(
                "task {id}: waiting until it ends or asks something (Ctrl-C stops waiting, not the task; \
`volcanic a2a subscribe {url} {id}{flags}` follows it again, --stream shows the answer as it comes)"
            ));
            waiting.spin(format!("waiting for task {id}…"));
            task_id = Some(id.clone());
        }
    }
    waiting.clear();
    match (task_id, message) {
        (Some(id), _) => {
            let task = client.get_task(&id, None).await.map_err(failure)?;
            Ok(printer.task(&task))
        }
        (None, Some(message)) => {
            Ok(printer.send_response(&a2a::SendMessageResponse::Message(message)))
        }
        (None, None) => Err(Failure {
            code: crate::Exit::Failed,
            message: "the agent ended the stream without naming a task or answering".to_owned(),
        }),
    }
}

/// The waiting shown on stderr.
struct Waiting {
    live: bool,
    bar: Option<ProgressBar>,
}

impl Waiting {
    fn new() -> Waiting {
        Waiting { live: std::io::stderr().is_terminal(), bar: None }
    }

    /// A spinner with `text`, on a terminal only.
    fn spin(&mut self, text: String) {
        if !self.live {
            return;
        }
        match &self.bar {
            Some(bar) => bar.set_message(text),
            None => self.bar = Some(crate::cmd::spinner::start(text)),
        }
    }

    /// A line that stays, above the spinner.
    fn line(&self, text: &str) {
        let write = || {
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        };
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    fn clear(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.clear();
    }
}
