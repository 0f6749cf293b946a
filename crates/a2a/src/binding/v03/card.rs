//! The 0.3 agent card (A2A 0.3.0 §5.5) and the 0.3 fields of the blended card (docs/a2a.md, "The public card"):
//! endpoint information from the `protocolVersion: "0.3"` interfaces, OpenAPI-style security
//! schemes with `type`, and `security: [{name: [scopes]}]`.

use serde_json::{Map, Value, json};

use crate::binding::{parse_version, wire_json};
use crate::request::Version;

/// The top-level 0.3 fields of the blended card: `protocolVersion`, `url`, `preferredTransport`,
/// `additionalInterfaces`, `supportsAuthenticatedExtendedCard` and `security`.
///
/// Endpoints come from the card's 0.3 interfaces (all interfaces when it lists none), the
/// preferred one being the first JSON-RPC entry.
pub(crate) fn card_fields(card: &a2a::AgentCard) -> Map<String, Value> {
    let v03: Vec<&a2a::AgentInterface> = card
        .supported_interfaces
        .iter()
        .filter(|interface| parse_version(&interface.protocol_version) == Ok(Version::V0_3))
        .collect();
    let listed = if v03.is_empty() { card.supported_interfaces.iter().collect() } else { v03 };
    let preferred = listed
        .iter()
        .find(|interface| interface.protocol_binding == a2a::TRANSPORT_PROTOCOL_JSONRPC)
        .or(listed.first());

    let mut fields = Map::new();
    fields.insert("protocolVersion".into(), json!("0.3.0"));
    if let Some(preferred) = preferred {
        fields.insert("url".into(), json!(preferred.wire_url()));
        fields.insert("preferredTransport".into(), json!(preferred.protocol_binding));
    }
    if !listed.is_empty() {
        let additional: Vec<Value> = listed
            .iter()
            .map(|i| json!({"url": i.wire_url(), "transport": i.protocol_binding}))
            .collect();
        fields.insert("additionalInterfaces".into(), Value::Array(additional));
    }
    let extended = card.capabilities.extended_agent_card.unwrap_or(false);
    fields.insert("supportsAuthenticatedExtendedCard".into(), Value::Bool(extended));
    if let Some(requirements) = &card.security_requirements {
        fields.insert("security".into(), wire_json(requirements));
    }
    fields
}

/// Adds the 0.3 keys (`type`, `in`, `name`, …) beside the 1.0 key of every `securitySchemes`
/// entry of serialized card JSON, so that each entry carries both shapes.
pub(crate) fn add_security_scheme_fields(
    card_json: &mut Map<String, Value>,
    card: &a2a::AgentCard,
) {
    let (Some(schemes), Some(Value::Object(entries))) =
        (&card.security_schemes, card_json.get_mut("securitySchemes"))
    else {
        return;
    };
    for (name, scheme) in schemes {
        if let Some(Value::Object(entry)) = entries.get_mut(name) {
            entry.extend(security_scheme(scheme));
        }
    }
}

/// The pure 0.3 card, answered to 0.3 `agent/getAuthenticatedExtendedCard` (docs/a2a.md, "The public card":
/// the extended card comes in the shape of the requesting version).
pub(crate) fn card(card: &a2a::AgentCard) -> Value {
    let mut value = wire_json(card);
    let Some(map) = value.as_object_mut() else { return value };
    map.remove("supportedInterfaces");
    map.remove("securityRequirements");
    if let Some(Value::Object(capabilities)) = map.get_mut("capabilities") {
        capabilities.remove("extendedAgentCard");
    }
    if let Some(schemes) = &card.security_schemes {
        let v03: Map<String, Value> = schemes
            .iter()
            .map(|(name, scheme)| (name.clone(), Value::Object(security_scheme(scheme))))
            .collect();
        map.insert("securitySchemes".into(), Value::Object(v03));
    }
    if let Some(Value::Array(skills)) = map.get_mut("skills") {
        for (json, skill) in skills.iter_mut().zip(&card.skills) {
            let (Some(json), Some(requirements)) =
                (json.as_object_mut(), &skill.security_requirements)
            else {
                continue;
            };
            json.remove("securityRequirements");
            json.insert("security".into(), wire_json(requirements));
        }
    }
    map.extend(card_fields(card));
    value
}

/// The 0.3 OpenAPI-style keys of a security scheme.
fn security_scheme(scheme: &a2a::SecurityScheme) -> Map<String, Value> {
    let mut fields = Map::new();
    let mut put = |key: &str, value: Option<&String>| {
        if let Some(value) = value {
            fields.insert(key.into(), json!(value));
        }
    };
    let (kind, description) = match scheme {
        a2a::SecurityScheme::ApiKey(s) => {
            put("in", Some(&s.location));
            put("name", Some(&s.name));
            ("apiKey", &s.description)
        }
        a2a::SecurityScheme::HttpAuth(s) => {
            put("scheme", Some(&s.scheme));
            put("bearerFormat", s.bearer_format.as_ref());
            ("http", &s.description)
        }
        a2a::SecurityScheme::OAuth2(s) => {
            put("oauth2MetadataUrl", s.oauth2_metadata_url.as_ref());
            ("oauth2", &s.description)
        }
        a2a::SecurityScheme::OpenIdConnect(s) => {
            put("openIdConnectUrl", Some(&s.open_id_connect_url));
            ("openIdConnect", &s.description)
        }
        a2a::SecurityScheme::MutualTls(s) => ("mutualTLS", &s.description),
    };
    put("description", description.as_ref());
    if let a2a::SecurityScheme::OAuth2(s) = scheme {
        fields.insert("flows".into(), wire_json(&s.flows));
    }
    fields.insert("type".into(), json!(kind));
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_card() -> a2a::AgentCard {
        serde_json::from_value(json!({
            "name": "n", "description": "d", "version": "1.0.0",
            "supportedInterfaces": [
                {"url": "https://b/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "https://b/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
            ],
            "capabilities": {"streaming": true, "extendedAgentCard": true},
            "securitySchemes": {
                "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key", "description": "key"}},
                "oidc": {"openIdConnectSecurityScheme": {"openIdConnectUrl": "https://o"}},
                "mtls": {"mtlsSecurityScheme": {}},
                "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "https://t", "scopes": {"r": "read"}}}}}
            },
            "securityRequirements": [{"schemes": {"apiKey": {"list": []}}}],
            "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"],
                        "securityRequirements": [{"schemes": {"oauth": {"list": ["r"]}}}]}]
        }))
        .unwrap()
    }

    #[test]
    fn card_is_pure_v03() {
        assert_eq!(
            card(&sample_card()),
            json!({
                "protocolVersion": "0.3.0", "name": "n", "description": "d", "version": "1.0.0",
                "url": "https://b/a2a", "preferredTransport": "JSONRPC",
                "additionalInterfaces": [{"url": "https://b/a2a", "transport": "JSONRPC"}],
                "capabilities": {"streaming": true},
                "securitySchemes": {
                    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key", "description": "key"},
                    "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://o"},
                    "mtls": {"type": "mutualTLS"},
                    "oauth": {"type": "oauth2", "flows": {"clientCredentials": {"tokenUrl": "https://t", "scopes": {"r": "read"}}}}
                },
                "security": [{"apiKey": []}],
                "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"],
                            "security": [{"oauth": ["r"]}]}],
                "supportsAuthenticatedExtendedCard": true
            })
        );
    }

    #[test]
    fn card_fields_without_v03_interfaces_fall_back_to_all() {
        let mut card = sample_card();
        card.supported_interfaces = vec![
            a2a::AgentInterface::new("https://b/a2a/v1", "HTTP+JSON"),
            a2a::AgentInterface::new("https://b/a2a", "JSONRPC"),
        ];
        card.capabilities.extended_agent_card = None;
        card.security_requirements = None;
        assert_eq!(
            Value::Object(card_fields(&card)),
            json!({
                "protocolVersion": "0.3.0", "url": "https://b/a2a", "preferredTransport": "JSONRPC",
                "additionalInterfaces": [
                    {"url": "https://b/a2a/v1", "transport": "HTTP+JSON"},
                    {"url": "https://b/a2a", "transport": "JSONRPC"}
                ],
                "supportsAuthenticatedExtendedCard": false
            })
        );
    }
}
