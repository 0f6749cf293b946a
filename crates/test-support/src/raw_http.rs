//! A tiny blocking HTTP/1.1 client over `std::net`, for tests that drive a server in a child
//! process without an async runtime, or that must see exactly the bytes on the wire.
//!
//! Every request is sent on a fresh connection with `Connection: close`, and the answer is read
//! until the server closes it, so no response framing is parsed. Each read and write is bounded
//! by the timeout the caller passes.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A request with a JSON body as the A2A tests send it (A2A 1.0, `Connection: close`), with an
/// `X-API-Key` header when `key` is given. `host` is the `host:port` the request goes to.
pub fn a2a_request(method: &str, path: &str, host: &str, key: Option<&str>, body: &str) -> String {
    let key_header = key.map(|k| format!("X-API-Key: {k}\r\n")).unwrap_or_default();
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{key_header}A2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Sends `request` to `address` (`host:port`) on a new connection and reads until the server
/// closes it; the whole response, head and body, decoded lossily as UTF-8.
///
/// # Errors
/// A failed connect, a write or read error, or `timeout` passing without progress on one read or
/// write.
pub fn exchange(address: &str, request: &str, timeout: Duration) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    Ok(String::from_utf8_lossy(&response).into_owned())
}

/// A JSON-RPC `POST /a2a` of `body` with `key` to `base` (`http://host:port`): the status and the
/// whole response. Panics when no complete answer comes (see [`exchange`]).
pub fn post_a2a(base: &str, key: &str, body: &str, timeout: Duration) -> (u16, String) {
    let address = base.strip_prefix("http://").unwrap();
    let request = a2a_request("POST", "/a2a", address, Some(key), body);
    let response = exchange(address, &request, timeout).unwrap();
    (status_of(&response).unwrap(), response)
}

/// The status code of a raw response.
pub fn status_of(response: &str) -> Option<u16> {
    response.split(' ').nth(1)?.parse().ok()
}

/// The body of a raw response: everything after the head (empty when there is no head's end).
pub fn body_of(response: &str) -> &str {
    response.split_once("\r\n\r\n").map(|(_, body)| body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a2a_request_writes_the_key_header_only_when_given() {
        assert_eq!(
            a2a_request("POST", "/a2a", "127.0.0.1:1", Some("k"), "{}"),
            "POST /a2a HTTP/1.1\r\nHost: 127.0.0.1:1\r\nX-API-Key: k\r\nA2A-Version: 1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
        );
        assert!(!a2a_request("GET", "/", "127.0.0.1:1", None, "").contains("X-API-Key"));
    }

    #[test]
    fn status_and_body_of_a_raw_response() {
        let response = "HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\nno";
        assert_eq!((status_of(response), body_of(response)), (Some(404), "no"));
        assert_eq!((status_of(""), body_of("")), (None, ""));
    }
}
