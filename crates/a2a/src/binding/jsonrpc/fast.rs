//! The fast path of [`super::decode`] for the commonest call, a 1.0 `GetTask` in its plain shape:
//! `{"jsonrpc":"2.0","id":…,"method":"GetTask","params":{"id":"…"}}`, optionally with a numeric
//! `historyLength`. It reads that shape straight into the request without building the
//! `serde_json::Value` tree the general decoder normalises (about 5% of a GetTask's CPU).
//!
//! It answers only where the general decoder would answer the same: anything else (another
//! method, a repeated or unknown member, an escaped string, a `null`, a string where a number
//! goes, a version the header contradicts, an array where an object goes) is `None`, and the
//! general decoder takes the body from the start. Tests check the two agree.

use std::fmt;

use serde::Deserializer as _;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::{Decoded, is_valid_id};
use crate::request::{Request, Version};

/// Decodes `body` when it is a plain 1.0 GetTask that `requested` (the `A2A-Version` header)
/// does not contradict; `None` sends it to the general decoder.
pub(super) fn decode_get_task(body: &[u8], requested: Option<Version>) -> Option<Decoded> {
    if requested.is_some_and(|requested| requested != Version::V1_0) {
        return None;
    }
    let mut reader = serde_json::Deserializer::from_slice(body);
    // `deserialize_map` refuses arrays and scalars, unlike a derived struct, which would also
    // read an array.
    let call = reader.deserialize_map(CallVisitor).ok()??;
    reader.end().ok()?;
    Some(call)
}

struct CallVisitor;

impl<'de> Visitor<'de> for CallVisitor {
    type Value = Option<Decoded>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON-RPC call")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Decoded>, A::Error> {
        let (mut jsonrpc, mut id, mut method, mut params) = (false, None, false, None);
        while let Some(key) = map.next_key::<&str>()? {
            match key {
                "jsonrpc" if !jsonrpc => jsonrpc = map.next_value::<&str>()? == "2.0",
                "id" if id.is_none() => id = Some(map.next_value::<Value>()?),
                "method" if !method => method = map.next_value::<&str>()? == "GetTask",
                "params" if params.is_none() => match map.next_value_seed(ParamsSeed)? {
                    Some(request) => params = Some(request),
                    None => return Ok(None),
                },
                // A repeat, or a member the general decoder reads another way.
                _ => return Ok(None),
            }
            // A wrong `jsonrpc` or another method: the general decoder answers them.
            if (key == "jsonrpc" && !jsonrpc) || (key == "method" && !method) {
                return Ok(None);
            }
        }
        // The general decoder answers `id: null` like a missing `id`; `Value` reads null as null.
        let id = id.unwrap_or(Value::Null);
        match (jsonrpc, method, params) {
            (true, true, Some(request)) if is_valid_id(&id) => {
                Ok(Some(Decoded { id, version: Version::V1_0, request: Request::GetTask(request) }))
            }
            _ => Ok(None),
        }
    }
}

/// GetTask's params, when plain: `None` for anything the general decoder would rewrite or refuse.
struct ParamsSeed;

impl<'de> de::DeserializeSeed<'de> for ParamsSeed {
    type Value = Option<a2a::GetTaskRequest>;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ParamsSeed {
    type Value = Option<a2a::GetTaskRequest>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("GetTask params")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut id, mut history_length) = (None, None);
        let mut plain = true;
        while let Some(key) = map.next_key::<&str>()? {
            match key {
                // A borrowed `&str` fails on escapes: the general decoder takes those.
                "id" if id.is_none() => id = Some(map.next_value::<&str>()?),
                "historyLength" if history_length.is_none() => {
                    history_length = Some(map.next_value::<i32>()?);
                }
                _ => {
                    plain = false;
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(id.filter(|_| plain).map(|id| a2a::GetTaskRequest {
            id: id.to_owned(),
            history_length,
            tenant: None,
        }))
    }
}
