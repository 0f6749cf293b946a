//! What a call to another agent fails with: the network, the credentials, the agent's card, an
//! A2A error the agent answered, or an answer that is not A2A. Messages name the URL and never a
//! key (keys travel in headers only, and no header is ever part of an error).

/// A failed client call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// No HTTP answer: refused connection, unknown host, TLS failure, timeout.
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// HTTP 401 or 403: the key is missing, unknown or not allowed.
    #[error("{url} refused the call (HTTP {status}): {}", if *.sent_key { "the key was not accepted" } else { "it needs a key" })]
    Unauthorized { url: String, status: u16, sent_key: bool },
    /// The agent answered with an A2A (or JSON-RPC) error.
    #[error("the agent answered {}: {message}", code_name(*.code))]
    Agent { code: i32, message: String },
    /// The agent card is missing, not JSON, or lists no interface this client speaks.
    #[error("bad agent card at {url}: {reason}")]
    BadCard { url: String, reason: String },
    /// The card offers no interface matching what was asked for.
    #[error("the agent offers no {wanted} interface (it offers: {offered})")]
    NoInterface { wanted: String, offered: String },
    /// An HTTP error status without an A2A error in the body.
    #[error("HTTP {status} from {url}: {excerpt}")]
    Http { url: String, status: u16, excerpt: String },
    /// A 2xx answer that is not the A2A shape expected.
    #[error("unexpected answer from {url}: {reason}")]
    BadResponse { url: String, reason: String },
    /// The operation does not exist in the protocol version in use.
    #[error("{operation} does not exist in A2A {version}")]
    NotInVersion { operation: &'static str, version: &'static str },
    /// The agent redirected the call somewhere the client does not follow.
    #[error("{url} redirected to {to}, {why}")]
    Redirected { url: String, to: String, why: Refusal },
    /// The card was served from another origin than the one asked (through a redirect), so the
    /// interfaces it names are not the asked agent's word: the key is not sent to them.
    #[error(
        "the card asked for at {card} was served by {served_from}, another origin: your key is not sent to the interface it names ({interface})"
    )]
    KeyWithheld { card: String, served_from: String, interface: String },
}

impl ClientError {
    /// The A2A / JSON-RPC error code, when the agent answered one.
    pub fn code(&self) -> Option<i32> {
        match self {
            ClientError::Agent { code, .. } => Some(*code),
            ClientError::Unreachable { .. }
            | ClientError::Unauthorized { .. }
            | ClientError::BadCard { .. }
            | ClientError::NoInterface { .. }
            | ClientError::Http { .. }
            | ClientError::BadResponse { .. }
            | ClientError::NotInVersion { .. }
            | ClientError::Redirected { .. }
            | ClientError::KeyWithheld { .. } => None,
        }
    }
}

/// Why a redirect was not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It leads to another origin, and only same-origin redirects are followed.
    OtherOrigin,
    /// It leads to a link-local or cloud metadata address.
    LinkLocal,
    /// Its `Location` is not an http or https URL.
    NotHttp,
    /// Its `Location` carries a user name or password.
    Userinfo,
    /// The call was redirected more than [`MAX_REDIRECTS`](super::redirect::MAX_REDIRECTS) times.
    TooMany,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refusal::OtherOrigin => {
                "another origin (scheme, host and port): redirects are followed only within the origin called"
            }
            Refusal::LinkLocal => "a link-local or cloud metadata address, which is never followed",
            Refusal::NotHttp => "not an http or https URL",
            Refusal::Userinfo => "a URL with a user name or password, which is never followed",
            Refusal::TooMany => "one redirect too many (at most 10 are followed)",
        })
    }
}

/// The name of an A2A or JSON-RPC error code, as the spec's error catalogue calls it.
pub fn code_name(code: i32) -> &'static str {
    use a2a::error_code as c;
    match code {
        c::TASK_NOT_FOUND => "TaskNotFound",
        c::TASK_NOT_CANCELABLE => "TaskNotCancelable",
        c::PUSH_NOTIFICATION_NOT_SUPPORTED => "PushNotificationNotSupported",
        c::UNSUPPORTED_OPERATION => "UnsupportedOperation",
        c::CONTENT_TYPE_NOT_SUPPORTED => "ContentTypeNotSupported",
        c::INVALID_AGENT_RESPONSE => "InvalidAgentResponse",
        c::EXTENDED_CARD_NOT_CONFIGURED => "ExtendedAgentCardNotConfigured",
        c::EXTENSION_SUPPORT_REQUIRED => "ExtensionSupportRequired",
        c::VERSION_NOT_SUPPORTED => "VersionNotSupported",
        c::PARSE_ERROR => "ParseError",
        c::INVALID_REQUEST => "InvalidRequest",
        c::METHOD_NOT_FOUND => "MethodNotFound",
        c::INVALID_PARAMS => "InvalidParams",
        c::INTERNAL_ERROR => "InternalError",
        _ => "an error",
    }
}

/// A short, single-line excerpt of an answer body for an error message.
pub(super) fn excerpt(body: &str) -> String {
    const MAX_CHARS: usize = 200;
    let line: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(MAX_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None if line.is_empty() => "(empty body)".to_owned(),
        None => line,
    }
}

/// A failed request to `url`, as [`ClientError::Unreachable`].
pub(crate) fn unreachable_at(url: &str, error: &reqwest::Error) -> ClientError {
    let reason = if error.is_timeout() { "timed out".to_owned() } else { chain(error) };
    ClientError::Unreachable { url: url.to_owned(), reason }
}

/// What went wrong, without reqwest's "for url (…)" (the URL is said once).
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = Vec::new();
    let mut next = error.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    // The innermost cause says what happened ("Connection refused"); the outer ones are
    // reqwest's and hyper's wrappers around it.
    parts.pop().unwrap_or_else(|| error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let cases = [
            (
                ClientError::Agent { code: -32001, message: "Task not found".into() },
                "the agent answered TaskNotFound: Task not found",
            ),
            (
                ClientError::Unauthorized {
                    url: "http://h/a2a".into(),
                    status: 401,
                    sent_key: false,
                },
                "http://h/a2a refused the call (HTTP 401): it needs a key",
            ),
            (
                ClientError::Unauthorized {
                    url: "http://h/a2a".into(),
                    status: 401,
                    sent_key: true,
                },
                "http://h/a2a refused the call (HTTP 401): the key was not accepted",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
        }
        assert_eq!(excerpt(" a\n b "), "a b");
        assert_eq!(excerpt(""), "(empty body)");
    }
}
