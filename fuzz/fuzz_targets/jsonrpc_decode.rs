//! The JSON-RPC request decoder with the 0.3 → 1.0 conversion. Input: an `A2A-Version` header
//! value, a newline, then the request body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use volcanic_a2a::binding::{jsonrpc, requested_version};

fuzz_target!(|data: &[u8]| {
    let (header, body) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (Some(String::from_utf8_lossy(&data[..at]).into_owned()), &data[at + 1..]),
        None => (None, data),
    };
    let Ok(requested) = requested_version(header.as_deref(), None) else { return };
    match jsonrpc::decode(body, requested) {
        Ok(decoded) => {
            // The id decode echoes is the one the early-error path would echo.
            assert_eq!(jsonrpc::request_id(body), decoded.id);
            // Early errors of a streaming call are answered as SSE: the cheap check must agree.
            assert_eq!(jsonrpc::is_streaming_method(body), decoded.request.is_streaming());
            if let Some(version) = requested {
                assert_eq!(version, decoded.version, "a method contradicting the header passed");
            }
        }
        Err((id, error)) => {
            assert!(
                matches!(&id, Value::Null | Value::String(_))
                    || id.as_i64().is_some()
                    || id.as_u64().is_some(),
                "an error echoes an invalid id: {id}"
            );
            // Every error maps to a wire error object without panicking.
            let _ = jsonrpc::encode_error(&id, &error);
        }
    }
});
