//! A settled task's wire JSON, serialized once in parts ([`TaskJson`]), so an answer can leave
//! out the artifacts or keep only the last messages of the history without parsing it again.
//! Pure: no I/O, no cache; the cache (`cache.rs`) keeps these and the reply view (`view.rs`)
//! writes them.

/// A task's wire JSON (the 1.0 shape: what `serde_json::to_vec(&task)` gives), with the places of
/// its `artifacts` and `history` members, so a reply can leave out the artifacts or keep only the
/// last messages without parsing it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskJson {
    body: Box<[u8]>,
    /// `,"artifacts":[…]`, as byte offsets into `body`.
    artifacts: Option<(u32, u32)>,
    /// `,"history":[…]` and where each message in it starts.
    history: Option<History>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct History {
    start: u32,
    end: u32,
    /// The offset of each message's first byte.
    items: Box<[u32]>,
}

/// Whether an answer shows a task's artifacts (ListTasks leaves them out unless asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Artifacts {
    Shown,
    Omitted,
}

impl TaskJson {
    /// Serializes `task` in parts.
    ///
    /// # Errors
    /// Serialization fails, the JSON is over 4 GiB, or it does not read back as a task.
    pub fn of(task: &a2a::Task) -> Result<TaskJson, serde_json::Error> {
        let offset = |body: &Vec<u8>| {
            u32::try_from(body.len())
                .map_err(|_| serde::ser::Error::custom("a task's JSON is over 4 GiB"))
        };
        let head = a2a::Task {
            id: task.id.clone(),
            context_id: task.context_id.clone(),
            status: task.status.clone(),
            artifacts: None,
            history: None,
            metadata: None,
        };
        // `{"id":…,"contextId":…,"status":{…}}` less its closing brace; the optional members
        // follow in the order serde writes them.
        let mut body = serde_json::to_vec(&head)?;
        body.pop();
        let artifacts = match &task.artifacts {
            Some(artifacts) => {
                let start = offset(&body)?;
                body.extend_from_slice(b",\"artifacts\":");
                serde_json::to_writer(&mut body, artifacts)?;
                Some((start, offset(&body)?))
            }
            None => None,
        };
        let history = match &task.history {
            Some(messages) => {
                let start = offset(&body)?;
                body.extend_from_slice(b",\"history\":[");
                let mut items = Vec::with_capacity(messages.len());
                for (i, message) in messages.iter().enumerate() {
                    if i > 0 {
                        body.push(b',');
                    }
                    items.push(offset(&body)?);
                    serde_json::to_writer(&mut body, message)?;
                }
                body.push(b']');
                Some(History { start, end: offset(&body)?, items: items.into() })
            }
            None => None,
        };
        if let Some(metadata) = &task.metadata {
            body.extend_from_slice(b",\"metadata\":");
            serde_json::to_writer(&mut body, metadata)?;
        }
        body.push(b'}');
        // The body is assembled by hand: check once, here on the cold path, that it reads back as
        // a task, so that reading it back on a request ([`TaskJson::to_task`]) cannot fail. A
        // task whose JSON does not is not cached (the store then answers from its file).
        serde_json::from_slice::<a2a::Task>(&body)?;
        Ok(TaskJson { body: body.into(), artifacts, history })
    }

    /// Appends the task's JSON to `out`: with its `artifacts` as `artifacts` says, and with only
    /// the last `history_length` messages when given (0 leaves `history` out, as
    /// [`super::apply_history_length`] does).
    pub fn write(&self, out: &mut Vec<u8>, history_length: Option<usize>, artifacts: Artifacts) {
        let body = &self.body[..];
        let mut at = 0;
        if artifacts == Artifacts::Omitted
            && let Some((start, end)) = self.artifacts
        {
            out.extend_from_slice(&body[at..start as usize]);
            at = end as usize;
        }
        if let (Some(history), Some(length)) = (&self.history, history_length)
            && (length == 0 || length < history.items.len())
        {
            out.extend_from_slice(&body[at..history.start as usize]);
            at = history.end as usize;
            if length > 0 {
                out.extend_from_slice(b",\"history\":[");
                let first = history.items[history.items.len() - length] as usize;
                // Up to and without the closing bracket, which is written next.
                out.extend_from_slice(&body[first..history.end as usize - 1]);
                out.push(b']');
            }
        }
        out.extend_from_slice(&body[at..]);
    }

    /// The task, as [`TaskJson::write`] shapes it.
    pub fn to_task(&self, history_length: Option<usize>, artifacts: Artifacts) -> a2a::Task {
        let mut bytes = Vec::with_capacity(self.body.len());
        self.write(&mut bytes, history_length, artifacts);
        // Invariant: `of` checked that the whole body reads back as a task, and `write` only
        // leaves out optional members (`artifacts`, `history`) or leading `history` items.
        #[allow(clippy::expect_used)]
        serde_json::from_slice(&bytes).expect("TaskJson::of checked the body reads back as a task")
    }

    /// Bytes of JSON held.
    pub fn size(&self) -> usize {
        self.body.len()
    }

    pub(super) fn offsets(&self) -> usize {
        self.history.as_ref().map_or(0, |history| history.items.len())
    }
}
