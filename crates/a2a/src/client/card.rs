//! Reading another agent's card: where it lives, which interfaces it offers (1.0
//! `supportedInterfaces`, and the 0.3 `url` / `preferredTransport` / `additionalInterfaces`,
//! A2A 1.0.1 §8.3; A2A 0.3.0 §5.6), and which one to talk to.
//!
//! The card is kept as JSON: cards in the wild mix versions (ours is blended: docs/a2a.md, "The public card"), and a strict
//! parse of one shape would refuse the others; only the fields the client needs are read.

use serde_json::Value;

use super::error::ClientError;
use super::{Binding, Interface};
use crate::request::Version;

/// The well-known path of the public card (A2A 1.0.1 §8.2).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// An agent's card as published, with the interfaces this client can speak, in the card's order
/// of preference.
#[derive(Debug, Clone)]
pub struct AgentCard {
    /// Where the card was asked for.
    pub url: String,
    /// Where it was served from: `url`, or where redirects led.
    pub served_from: String,
    /// The card as it was served.
    pub json: Value,
    /// The interfaces with a binding and version this client speaks (JSON-RPC or HTTP+JSON, 1.x
    /// or 0.3), the card's 1.0 list first, then the 0.3 fields.
    pub interfaces: Vec<Interface>,
}

impl AgentCard {
    /// Reads the interfaces of a card.
    ///
    /// # Errors
    ///
    /// [`ClientError::BadCard`] when the card is not a JSON object or lists no interface.
    pub fn parse(url: &str, json: Value) -> Result<AgentCard, ClientError> {
        let bad =
            |reason: &str| ClientError::BadCard { url: url.to_owned(), reason: reason.into() };
        if !json.is_object() {
            return Err(bad("not a JSON object"));
        }
        let mut interfaces = Vec::new();
        let mut offered = 0;
        for entry in json.get("supportedInterfaces").and_then(Value::as_array).into_iter().flatten()
        {
            offered += 1;
            let field = |name: &str| entry.get(name).and_then(Value::as_str);
            let (Some(url), Some(binding), Some(version)) =
                (field("url"), field("protocolBinding"), field("protocolVersion"))
            else {
                continue;
            };
            if let (Some(binding), Some(version)) =
                (Binding::parse(binding), parse_version(version))
            {
                push_new(&mut interfaces, Interface { url: url.to_owned(), binding, version });
            }
        }
        // 0.3 cards (and the 0.3 half of blended ones): `url` with `preferredTransport`, plus
        // `additionalInterfaces`; `protocolVersion` says which 0.x it is.
        let v03 = json.get("protocolVersion").and_then(Value::as_str).map(parse_version);
        if let Some(main) = json.get("url").and_then(Value::as_str)
            && matches!(v03, None | Some(Some(Version::V0_3)))
        {
            offered += 1;
            let transport =
                json.get("preferredTransport").and_then(Value::as_str).unwrap_or("JSONRPC");
            if let Some(binding) = Binding::parse(transport) {
                let url = main.to_owned();
                push_new(&mut interfaces, Interface { url, binding, version: Version::V0_3 });
            }
            for entry in
                json.get("additionalInterfaces").and_then(Value::as_array).into_iter().flatten()
            {
                offered += 1;
                let url = entry.get("url").and_then(Value::as_str);
                let binding =
                    entry.get("transport").and_then(Value::as_str).and_then(Binding::parse);
                if let (Some(url), Some(binding)) = (url, binding) {
                    let url = url.to_owned();
                    push_new(&mut interfaces, Interface { url, binding, version: Version::V0_3 });
                }
            }
        }
        if offered == 0 {
            return Err(bad("it lists no interface (no supportedInterfaces, no url)"));
        }
        if interfaces.is_empty() {
            return Err(bad(
                "none of its interfaces is JSON-RPC or HTTP+JSON at A2A 1.0 or 0.3, which this client speaks",
            ));
        }
        Ok(AgentCard { url: url.to_owned(), served_from: url.to_owned(), json, interfaces })
    }

    /// Whether the caller's key may go to `interface`. A card served from the origin it was asked
    /// at is that agent's word, and its interfaces get the key wherever they are. A card a
    /// redirect brought from another origin (only followed when asked for) is that other
    /// origin's word: its interfaces get the key only on the origin asked at.
    ///
    /// # Errors
    ///
    /// [`ClientError::KeyWithheld`] naming both origins.
    pub fn check_key_goes_to(&self, interface: &Interface) -> Result<(), ClientError> {
        let home = |url: &str| {
            let asked = url::Url::parse(&self.url).ok()?;
            Some(super::redirect::is_home(&asked, &url::Url::parse(url).ok()?))
        };
        let trusted = home(&self.served_from) == Some(true) || home(&interface.url) == Some(true);
        if trusted {
            return Ok(());
        }
        Err(ClientError::KeyWithheld {
            card: self.url.clone(),
            served_from: self.served_from.clone(),
            interface: interface.url.clone(),
        })
    }

    /// The agent's name, if the card has one.
    pub fn name(&self) -> Option<&str> {
        self.json.get("name").and_then(Value::as_str)
    }

    /// Picks the first interface (the card's preference) with the binding and version asked for,
    /// each `None` meaning any.
    ///
    /// # Errors
    ///
    /// [`ClientError::NoInterface`] naming what was asked for and what the card offers.
    pub fn choose(
        &self,
        binding: Option<Binding>,
        version: Option<Version>,
    ) -> Result<Interface, ClientError> {
        self.interfaces
            .iter()
            .find(|i| {
                binding.is_none_or(|b| i.binding == b) && version.is_none_or(|v| i.version == v)
            })
            .cloned()
            .ok_or_else(|| ClientError::NoInterface {
                wanted: describe(binding, version),
                offered: self
                    .interfaces
                    .iter()
                    .map(|i| format!("{} {}", i.binding.as_str(), i.version.as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// The card URL for what a user typed: a URL ending in `.json` is the card itself; anything else
/// is the agent's base URL, under which the card has its well-known path.
pub fn card_url(base: &str) -> String {
    let trimmed = base.trim_end_matches('/');
    let path = trimmed.split_once("://").map_or(trimmed, |(_, rest)| rest);
    if path.contains('/') && path.ends_with(".json") {
        trimmed.to_owned()
    } else {
        format!("{trimmed}{CARD_PATH}")
    }
}

fn push_new(interfaces: &mut Vec<Interface>, interface: Interface) {
    if !interfaces.contains(&interface) {
        interfaces.push(interface);
    }
}

/// `1.x` is 1.0, `0.3.x` is 0.3; anything else is a version this client does not speak.
fn parse_version(raw: &str) -> Option<Version> {
    let numbers: Option<Vec<u32>> = raw.trim().split('.').map(|p| p.parse().ok()).collect();
    match numbers.as_deref()? {
        [1] | [1, _] | [1, _, _] => Some(Version::V1_0),
        [0, 3] | [0, 3, _] => Some(Version::V0_3),
        _ => None,
    }
}

fn describe(binding: Option<Binding>, version: Option<Version>) -> String {
    match (binding, version) {
        (Some(b), Some(v)) => format!("{} {}", b.as_str(), v.as_str()),
        (Some(b), None) => b.as_str().to_owned(),
        (None, Some(v)) => format!("A2A {}", v.as_str()),
        (None, None) => "usable".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn interface(url: &str, binding: Binding, version: Version) -> Interface {
        Interface { url: url.into(), binding, version }
    }

    #[test]
    fn blended_card_lists_1_0_then_0_3_interfaces() {
        let card = json!({
            "name": "x",
            "supportedInterfaces": [
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "http://h/a2a/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "http://h/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
                {"url": "http://h/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ],
            "protocolVersion": "0.3.0", "url": "http://h/a2a", "preferredTransport": "JSONRPC",
            "additionalInterfaces": [{"url": "http://h/a2a", "transport": "HTTP+JSON"}]
        });
        let card = AgentCard::parse("http://h", card).unwrap();
        assert_eq!(
            card.interfaces,
            vec![
                interface("http://h/a2a", Binding::JsonRpc, Version::V1_0),
                interface("http://h/a2a/v1", Binding::Rest, Version::V1_0),
                interface("http://h/a2a", Binding::JsonRpc, Version::V0_3),
                interface("http://h/a2a", Binding::Rest, Version::V0_3),
            ]
        );
        assert_eq!(card.choose(None, None).unwrap().binding, Binding::JsonRpc);
        assert_eq!(
            card.choose(Some(Binding::Rest), Some(Version::V0_3)).unwrap().url,
            "http://h/a2a"
        );
    }

    #[test]
    fn cards_without_usable_interfaces_are_refused() {
        let grpc_only = json!({"supportedInterfaces": [
            {"url": "http://h", "protocolBinding": "GRPC", "protocolVersion": "1.0"}]});
        let cases = [json!([]), json!({"name": "x"}), grpc_only];
        for card in cases {
            assert!(matches!(AgentCard::parse("u", card), Err(ClientError::BadCard { .. })));
        }
        let card = AgentCard::parse("u", json!({"url": "http://h/a2a"})).unwrap();
        assert_eq!(
            card.choose(None, Some(Version::V1_0)),
            Err(ClientError::NoInterface {
                wanted: "A2A 1.0".into(),
                offered: "jsonrpc 0.3".into()
            })
        );
    }

    #[test]
    fn the_key_goes_to_a_redirected_cards_interfaces_only_on_the_origin_asked() {
        let json = json!({"supportedInterfaces": [
            {"url": "http://other:1/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://home:1/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}]});
        let mut card = AgentCard::parse("http://home:1/.well-known/agent-card.json", json).unwrap();
        let (elsewhere, home) = (card.interfaces[0].clone(), card.interfaces[1].clone());
        // Served where asked: the card names its interfaces, wherever they are.
        assert_eq!(card.check_key_goes_to(&elsewhere), Ok(()));
        card.served_from = "http://home:1/cards/v2.json".into();
        assert_eq!(card.check_key_goes_to(&elsewhere), Ok(()));
        // Brought by a redirect from another origin: only the origin asked at gets the key.
        card.served_from = "http://other:1/.well-known/agent-card.json".into();
        assert_eq!(card.check_key_goes_to(&home), Ok(()));
        assert!(matches!(
            card.check_key_goes_to(&elsewhere),
            Err(ClientError::KeyWithheld { interface, .. }) if interface == "http://other:1/a2a"
        ));
    }

    #[test]
    fn card_url_table() {
        let cases = [
            ("http://h:1", "http://h:1/.well-known/agent-card.json"),
            ("http://h:1/", "http://h:1/.well-known/agent-card.json"),
            ("http://h:1/agent", "http://h:1/agent/.well-known/agent-card.json"),
            ("http://h:1/.well-known/agent-card.json", "http://h:1/.well-known/agent-card.json"),
            ("http://h:1/cards/x.json", "http://h:1/cards/x.json"),
        ];
        for (given, url) in cases {
            assert_eq!(card_url(given), url, "{given}");
        }
    }
}
