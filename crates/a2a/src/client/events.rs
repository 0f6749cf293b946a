//! An agent's SSE stream (the WHATWG `text/event-stream` format) read into the `data` of each
//! event, with bounds a hostile or broken agent cannot get past.
//!
//! One event (the lines up to a blank line) may grow to [`EventLimits::max_bytes`], and once it
//! has begun it must keep coming, at least [`MIN_PROGRESS`] bytes every
//! [`EventLimits::stall`], or end: otherwise an agent could send one event that never ends,
//! slowly enough that the client neither fails nor shows anything while its memory grows.
//! Between events there is no time limit: an agent may work, silent or sending keep-alive
//! comments, for as long as it takes.
//!
//! The parser is ours, and looks at each byte once: a general SSE parser that searches its whole
//! buffer for the end of a line whenever bytes arrive takes time quadratic in the length of a
//! line, which one long event turns into hours. Only `data` fields are kept (the client reads
//! nothing else); `event`, `id`, `retry` and comments are read past.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::time::Instant;

use super::error::ClientError;

/// How much of an unfinished event must arrive within each [`EventLimits::stall`]: 64 KiB, so that
/// a big event (a task with files) on a slow link keeps going, and a trickle does not.
pub const MIN_PROGRESS: usize = 64 * 1024;

/// The bounds of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Largest event, in bytes (all its lines, comments included).
    pub max_bytes: usize,
    /// How long an unfinished event may take to grow by [`MIN_PROGRESS`] bytes or end.
    pub stall: Duration,
}

/// The `data` of each event of `bytes` from `url`, until the stream ends or fails: a transport
/// error is [`ClientError::Unreachable`], an event past its bounds [`ClientError::BadResponse`].
/// Nothing follows an error.
pub(crate) fn data<S, E>(
    url: String,
    bytes: S,
    limits: EventLimits,
) -> impl Stream<Item = Result<String, ClientError>> + Send + Unpin
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::fmt::Display,
{
    let state = State {
        url,
        bytes: Box::pin(bytes),
        limits,
        parser: Parser::default(),
        ready: VecDeque::new(),
        error: None,
        done: false,
    };
    Box::pin(futures_util::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(event) = state.ready.pop_front() {
                return Some((Ok(event), state));
            }
            if let Some(error) = state.error.take() {
                state.done = true;
                return Some((Err(error), state));
            }
            if state.done {
                return None;
            }
            let next = match state.parser.open_since {
                // Within an event: it must progress by a deadline.
                Some(since) => {
                    let deadline = since + state.limits.stall;
                    match tokio::time::timeout_at(deadline, state.bytes.next()).await {
                        Ok(next) => next,
                        Err(_) => {
                            let reason = format!(
                                "the agent began an event and stopped sending it (less than {} KiB of it in {} s)",
                                MIN_PROGRESS / 1024,
                                state.limits.stall.as_secs_f32()
                            );
                            state.error = Some(state.answer_error(reason));
                            continue;
                        }
                    }
                }
                None => state.bytes.next().await,
            };
            match next {
                None => state.done = true,
                Some(Err(e)) => {
                    let url = state.url.clone();
                    state.error = Some(ClientError::Unreachable { url, reason: e.to_string() });
                }
                Some(Ok(chunk)) => {
                    let fed = state.parser.feed(&chunk, &state.limits, Instant::now());
                    // Events completed before a failure in the same chunk still go out first.
                    state.ready.extend(state.parser.take_events());
                    if fed.is_err() {
                        let reason = format!(
                            "a stream event is larger than {} bytes",
                            state.limits.max_bytes
                        );
                        state.error = Some(state.answer_error(reason));
                    }
                }
            }
        }
    }))
}

struct State<S> {
    url: String,
    bytes: std::pin::Pin<Box<S>>,
    limits: EventLimits,
    parser: Parser,
    /// Events parsed and not yet given out.
    ready: VecDeque<String>,
    /// The failure to give out once `ready` is empty; nothing follows it.
    error: Option<ClientError>,
    /// The stream ended, or failed.
    done: bool,
}

impl<S> State<S> {
    /// What the agent sent is past a bound.
    fn answer_error(&self, reason: String) -> ClientError {
        ClientError::BadResponse { url: self.url.clone(), reason }
    }
}

/// The parser's place in the stream.
#[derive(Debug, Default)]
struct Parser {
    /// The line so far (not kept for a comment).
    line: Vec<u8>,
    /// Whether a line has begun (some byte of it arrived).
    in_line: bool,
    /// The line so far is a comment.
    in_comment: bool,
    /// The last byte was a CR: a LF right after it ends nothing more.
    after_cr: bool,
    /// The stream's first bytes have been read past a byte order mark, if there was one.
    started: bool,
    /// How many bytes of a byte order mark have been read at the start.
    bom: usize,
    /// The current event's data lines, each followed by a LF.
    data: Vec<u8>,
    /// The current event has a field (it is not only comments).
    has_field: bool,
    /// Bytes since the last blank line.
    size: usize,
    /// When the current event began, or last grew by [`MIN_PROGRESS`]; `None` between events.
    open_since: Option<Instant>,
    /// Bytes of the current event since `open_since`.
    grown: usize,
    /// Complete events.
    events: Vec<String>,
}

impl Parser {
    fn take_events(&mut self) -> Vec<String> {
        std::mem::take(&mut self.events)
    }

    /// Takes in a chunk received at `now`; `Err` when an event grows past the cap.
    fn feed(&mut self, chunk: &[u8], limits: &EventLimits, now: Instant) -> Result<(), ()> {
        const BOM: &[u8] = "\u{feff}".as_bytes();
        for &byte in chunk {
            if !self.started {
                // A byte order mark at the start is skipped, in however many chunks it comes.
                if BOM.get(self.bom) == Some(&byte) {
                    self.bom += 1;
                    self.started = self.bom == BOM.len();
                    continue;
                }
                self.started = true;
            }
            if std::mem::take(&mut self.after_cr) && byte == b'\n' {
                continue;
            }
            match byte {
                b'\r' | b'\n' => {
                    self.after_cr = byte == b'\r';
                    self.end_line();
                }
                _ => {
                    // Checked before the byte is kept, so the buffer never grows past the cap.
                    if self.size >= limits.max_bytes {
                        return Err(());
                    }
                    self.size += 1;
                    if !self.in_line {
                        self.in_line = true;
                        self.in_comment = byte == b':';
                    }
                    if !self.in_comment {
                        self.line.push(byte);
                    }
                }
            }
            self.track(now);
        }
        Ok(())
    }

    /// Whether an event is in progress: it has a field, or a line of it is arriving.
    fn is_open(&self) -> bool {
        self.has_field || self.in_line
    }

    /// Moves the progress mark: an event that begins starts it, every [`MIN_PROGRESS`] bytes
    /// move it on, the end of an event clears it.
    fn track(&mut self, now: Instant) {
        match (self.is_open(), self.open_since) {
            (false, _) => self.open_since = None,
            (true, None) => {
                self.open_since = Some(now);
                self.grown = 0;
            }
            (true, Some(_)) if self.grown >= MIN_PROGRESS => {
                self.open_since = Some(now);
                self.grown = 0;
            }
            (true, Some(_)) => self.grown += 1,
        }
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        let (was_line, was_comment) = (self.in_line, self.in_comment);
        self.in_line = false;
        self.in_comment = false;
        if !was_line {
            // A blank line: the event is complete.
            let mut data = std::mem::take(&mut self.data);
            if data.pop().is_some() {
                let text = String::from_utf8(data)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
                self.events.push(text);
            }
            self.has_field = false;
            self.size = 0;
            return;
        }
        self.size += 1;
        if was_comment {
            return;
        }
        self.has_field = true;
        let colon = line.iter().position(|&b| b == b':').unwrap_or(line.len());
        if &line[..colon] != b"data" {
            return;
        }
        let start = match line.get(colon + 1) {
            Some(b' ') => colon + 2,
            Some(_) | None => (colon + 1).min(line.len()),
        };
        if self.data.is_empty() {
            // The usual event is one data line: its buffer becomes the event's, uncopied.
            let mut value = line;
            value.drain(..start);
            self.data = value;
        } else {
            self.data.extend_from_slice(&line[start..]);
        }
        self.data.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    async fn read_bytes(parts: Vec<Vec<u8>>, max_bytes: usize) -> Vec<Result<String, String>> {
        let limits = EventLimits { max_bytes, stall: HOUR };
        let chunks = futures_util::stream::iter(
            parts.into_iter().map(|p| Ok::<_, String>(Bytes::from(p))).collect::<Vec<_>>(),
        );
        data("u".into(), chunks, limits).map(|item| item.map_err(|e| e.to_string())).collect().await
    }

    async fn read(parts: &[&str], max_bytes: usize) -> Vec<Result<String, String>> {
        read_bytes(parts.iter().map(|p| p.as_bytes().to_vec()).collect(), max_bytes).await
    }

    #[tokio::test]
    async fn events_are_read_however_the_stream_is_cut() {
        let whole =
            "\u{feff}: hello\n\ndata: {\"a\":1}\n\nevent: x\nid: 7\ndata:two\ndata:  lines\n\n";
        let expected = vec![Ok("{\"a\":1}".to_owned()), Ok("two\n lines".to_owned())];
        for text in [whole.to_owned(), whole.replace('\n', "\r\n"), whole.replace('\n', "\r")] {
            assert_eq!(read(&[&text], 1 << 20).await, expected, "{text:?}");
            // One byte at a time (the byte order mark and the CR LF pairs cut too).
            let bytes = text.bytes().map(|b| vec![b]).collect();
            assert_eq!(read_bytes(bytes, 1 << 20).await, expected, "{text:?}");
        }
        // A CR LF cut between its two bytes is one line end, not two.
        assert_eq!(read(&["data: x\r", "\n\r", "\n"], 1 << 20).await, vec![Ok("x".to_owned())]);
        // An event without a blank line at the end of the stream is not complete.
        assert_eq!(read(&["data: x\n\ndata: y\n"], 1 << 20).await, vec![Ok("x".to_owned())]);
    }

    #[tokio::test]
    async fn events_over_the_cap_end_the_stream_with_an_error() {
        // Events of 12 bytes each pass a cap of 16, however they are cut into chunks.
        let small = read(&["data: 1234\n", "\ndata: 12", "34\n\r\n"], 16).await;
        assert_eq!(small, vec![Ok("1234".to_owned()), Ok("1234".to_owned())]);
        // One event that never ends is cut off at the cap, and nothing follows the error; an
        // event that completed in the same chunk comes first.
        let big = read(&["data: ok\n\ndata: 123456789", "0123456789", "more\n\n"], 16).await;
        assert_eq!(
            big,
            vec![
                Ok("ok".to_owned()),
                Err("unexpected answer from u: a stream event is larger than 16 bytes".to_owned())
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_that_stops_coming_ends_the_stream_but_silence_between_events_does_not() {
        let limits = EventLimits { max_bytes: 1 << 20, stall: Duration::from_secs(30) };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Result<Bytes, String>>();
        let received =
            futures_util::stream::unfold(rx, |mut rx| async move { Some((rx.recv().await?, rx)) });
        let mut events = data("u".into(), received, limits);
        // A whole event, then an hour of keep-alive comments: the stream waits.
        tx.send(Ok(Bytes::from_static(b"data: {}\n\n"))).unwrap();
        assert_eq!(events.next().await.unwrap().unwrap(), "{}");
        let keepalive = tx.clone();
        let comments = tokio::spawn(async move {
            for _ in 0..360 {
                tokio::time::sleep(Duration::from_secs(10)).await;
                keepalive.send(Ok(Bytes::from_static(b": ping\n"))).unwrap();
            }
        });
        let waited = tokio::time::timeout(HOUR, events.next()).await;
        assert!(waited.is_err(), "silence between events is allowed: {waited:?}");
        comments.await.unwrap();
        // An event begins and then trickles, a byte every 10 s: it fails 30 s after it began.
        tx.send(Ok(Bytes::from_static(b"data: {\"a\""))).unwrap();
        let began = Instant::now();
        let trickle = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                if tx.send(Ok(Bytes::from_static(b" "))).is_err() {
                    break;
                }
            }
        });
        let error = events.next().await.unwrap().unwrap_err();
        assert_eq!(began.elapsed(), Duration::from_secs(30));
        assert!(
            error.to_string().contains("stopped sending it (less than 64 KiB of it in 30 s)"),
            "{error}"
        );
        assert!(events.next().await.is_none(), "nothing follows the error");
        trickle.abort();
    }

    #[test]
    fn a_big_event_that_keeps_coming_is_not_stalled() {
        let limits = EventLimits { max_bytes: usize::MAX, stall: Duration::from_secs(30) };
        let mut parser = Parser::default();
        let start = Instant::now();
        let mut piece = b"data: ".to_vec();
        piece.resize(MIN_PROGRESS / 2, b'x');
        // Half the minimum every 10 s: the mark moves on every 64 KiB, so it is never 30 s old.
        for step in 0..20u64 {
            let now = start + Duration::from_secs(10 * step);
            parser.feed(&piece, &limits, now).unwrap();
            let since = parser.open_since.unwrap();
            assert!(now.duration_since(since) <= Duration::from_secs(10), "step {step}");
        }
        parser.feed(b"\n\n", &limits, start).unwrap();
        assert_eq!(parser.open_since, None);
        assert_eq!(parser.take_events()[0].len(), 20 * MIN_PROGRESS / 2 - 6);
    }

    #[test]
    fn one_long_line_is_read_in_linear_time() {
        // 64 MiB in 64 KiB chunks: a parser that searched its buffer again per chunk would scan
        // 32 GiB here.
        let limits = EventLimits { max_bytes: usize::MAX, stall: HOUR };
        let mut parser = Parser::default();
        let now = Instant::now();
        parser.feed(b"data: ", &limits, now).unwrap();
        let piece = vec![b'x'; 64 * 1024];
        let started = std::time::Instant::now();
        for _ in 0..1024 {
            parser.feed(&piece, &limits, now).unwrap();
        }
        parser.feed(b"\n\n", &limits, now).unwrap();
        assert_eq!(parser.take_events()[0].len(), 64 << 20);
        assert!(started.elapsed() < Duration::from_secs(30), "{:?}", started.elapsed());
    }
}
