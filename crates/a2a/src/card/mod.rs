//! Agent cards (A2A 1.0.1 §4.4.1, §8.3): the generic public card, and the per-workspace
//! extended card built from `<workspace>/.volcanic/a2a/card.json` with fallbacks.
//!
//! Both are the 1.0 shape; the 0.3 fields of the served, blended card (docs/a2a.md, "The public card") are added by the
//! binding layer. Both cards declare the same interfaces, capabilities and security schemes, so
//! a client that swaps in the extended card keeps talking the same way.
//!
//! card.json is small and read on every call, so an owner's edit applies to the next request.
//! It is read through [`volcanic_core::safe_file`]: a regular file of at most
//! [`CONFIG_FILE_CAP`] bytes, not a symbolic link; anything else falls back with a warning.

pub(crate) mod public;
pub mod signing;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tracing::warn;
use volcanic_core::safe_file::{self, CONFIG_FILE_CAP};

use crate::auth::A2aWorkspace;
use crate::config::A2aOptions;

/// The workspace's extended card file: `<workspace>/.volcanic/a2a/card.json`.
/// What the card says of the task-generation extension (`binding::generations`).
const GENERATIONS_DESCRIPTION: &str = "Task generations (A2A 1.1 draft, section 3.2.7): tasks and \
their events carry `generation`; GetTask with currentGeneration waits for a change; a send with \
configuration.ifGenerationMatch continues a task only at that generation. 1.0 calls only.";

pub fn card_path(workspace: &Path) -> PathBuf {
    workspace.join(".volcanic").join("a2a").join("card.json")
}

/// The base URL of the card's interfaces: `A2A__PublicUrl` without trailing `/`; unset, it is
/// built from the request: `<proto>://<host>`, where proto is the first `X-Forwarded-Proto`
/// value when it is `http` or `https` (else `http`) and host the `Host` header when it looks like
/// one (else `localhost`).
pub fn base_url(
    options: &A2aOptions,
    host_header: Option<&str>,
    forwarded_proto: Option<&str>,
) -> String {
    if let Some(url) = fixed_base_url(options) {
        return url.trim_end_matches('/').to_string();
    }
    let scheme = forwarded_proto
        .and_then(|proto| proto.split(',').next())
        .map(str::trim)
        .and_then(|proto| {
            ["https", "http"].into_iter().find(|known| proto.eq_ignore_ascii_case(known))
        })
        .unwrap_or("http");
    let host = host_header.map(str::trim).filter(|host| is_host(host)).unwrap_or("localhost");
    format!("{scheme}://{host}")
}

/// `A2A__PublicUrl` when it is set: the base URL is then the same for every request (else
/// [`base_url`] builds it from the request's headers).
pub fn fixed_base_url(options: &A2aOptions) -> Option<&str> {
    options.public_url.as_deref().map(str::trim).filter(|url| !url.is_empty())
}

/// A `Host` header value we are willing to echo: a name or address with an optional port.
fn is_host(host: &str) -> bool {
    (1..=255).contains(&host.len())
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b))
}

/// The public card: generic, the same for every workspace of the server.
pub fn public_card(options: &A2aOptions, base_url: &str) -> a2a::AgentCard {
    card(options.card_name.clone(), options.card_description.clone(), vec![chat_skill()], base_url)
}

/// The extended card of `workspace`, from its card.json, falling back per field: name to
/// `A2A__Card__Name`; description to the first non-empty line of PERSONA.md, then
/// `A2A__Card__Description`; skills to the generic `chat` skill. A malformed card.json is
/// ignored as a whole, with a warning naming the file. Blocking: reads two small files.
pub fn extended_card(
    options: &A2aOptions,
    workspace: &A2aWorkspace,
    base_url: &str,
) -> a2a::AgentCard {
    let file = read_card_file(&card_path(&workspace.path)).unwrap_or_default();
    let name = non_empty(file.name).unwrap_or_else(|| options.card_name.clone());
    let description = non_empty(file.description)
        .or_else(|| volcanic_core::workspace::persona_summary(&workspace.path))
        .unwrap_or_else(|| options.card_description.clone());
    let skills: Vec<a2a::AgentSkill> =
        file.skills.unwrap_or_default().into_iter().map(SkillFile::into_skill).collect();
    let skills = if skills.is_empty() { vec![chat_skill()] } else { skills };
    card(name, description, skills, base_url)
}

fn card(
    name: String,
    description: String,
    skills: Vec<a2a::AgentSkill>,
    base_url: &str,
) -> a2a::AgentCard {
    let interface = |path: &str, binding: &str, version: &str| a2a::AgentInterface {
        url: format!("{base_url}{path}"),
        protocol_binding: binding.to_string(),
        protocol_version: version.to_string(),
        tenant: None,
    };
    let security_schemes = HashMap::from([
        (
            "apiKey".to_string(),
            a2a::SecurityScheme::ApiKey(a2a::ApiKeySecurityScheme {
                location: "header".into(),
                name: "X-API-Key".into(),
                description: None,
            }),
        ),
        (
            "bearer".to_string(),
            a2a::SecurityScheme::HttpAuth(a2a::HttpAuthSecurityScheme {
                scheme: "Bearer".into(),
                description: None,
                bearer_format: None,
            }),
        ),
    ]);
    let either = |scheme: &str| HashMap::from([(scheme.to_string(), Vec::new())]);
    a2a::AgentCard {
        name,
        description,
        version: env!("CARGO_PKG_VERSION").to_string(),
        supported_interfaces: vec![
            interface("/a2a", a2a::TRANSPORT_PROTOCOL_JSONRPC, "1.0"),
            interface("/a2a/v1", a2a::TRANSPORT_PROTOCOL_HTTP_JSON, "1.0"),
            interface("/a2a", a2a::TRANSPORT_PROTOCOL_JSONRPC, "0.3"),
            // 0.3 REST clients append `/v1/message:send` to their interface URL (docs/a2a.md, "0.3 over HTTP+JSON").
            interface("/a2a", a2a::TRANSPORT_PROTOCOL_HTTP_JSON, "0.3"),
        ],
        capabilities: a2a::AgentCapabilities {
            streaming: Some(true),
            push_notifications: Some(true),
            // Activated per call with `A2A-Extensions`; unused, nothing on the wire changes.
            extensions: Some(vec![a2a::AgentExtension {
                uri: crate::binding::generations::GENERATIONS_EXTENSION.into(),
                description: Some(GENERATIONS_DESCRIPTION.into()),
                // Not required is the default, so left out: a verifier that re-encodes the card
                // from protobuf drops a `false` it holds, and the signature must match its bytes.
                required: None,
                params: None,
            }]),
            extended_agent_card: Some(true),
        },
        default_input_modes: vec![
            "text/plain".into(),
            "application/json".into(),
            "application/octet-stream".into(),
        ],
        default_output_modes: vec!["text/plain".into(), "application/json".into()],
        skills,
        provider: None,
        documentation_url: None,
        icon_url: None,
        security_schemes: Some(security_schemes),
        security_requirements: Some(vec![either("apiKey"), either("bearer")]),
        signatures: None,
    }
}

fn chat_skill() -> a2a::AgentSkill {
    a2a::AgentSkill {
        id: "chat".into(),
        name: "Chat".into(),
        description: "General assistant".into(),
        tags: vec!["chat".into()],
        examples: None,
        input_modes: None,
        output_modes: None,
        security_requirements: None,
    }
}

/// card.json as written by an owner; unknown fields are ignored.
#[derive(Debug, Default, Deserialize)]
struct CardFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    skills: Option<Vec<SkillFile>>,
}

#[derive(Debug, Deserialize)]
struct SkillFile {
    id: String,
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    examples: Option<Vec<String>>,
}

impl SkillFile {
    fn into_skill(self) -> a2a::AgentSkill {
        a2a::AgentSkill {
            id: self.id,
            name: self.name,
            description: self.description,
            tags: self.tags,
            examples: self.examples.filter(|examples| !examples.is_empty()),
            input_modes: None,
            output_modes: None,
            security_requirements: None,
        }
    }
}

/// The parsed card.json; `None` when it is missing (silently) or unreadable, malformed, not a
/// regular file, a symbolic link or over [`CONFIG_FILE_CAP`] (with a warning naming the file).
fn read_card_file(path: &Path) -> Option<CardFile> {
    let bytes = match safe_file::read_config(path, CONFIG_FILE_CAP) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return None,
        Err(err) => {
            warn!(file = %path.display(), error = %err, "card.json cannot be read, using the fallback card");
            return None;
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(file) => Some(file),
        Err(err) => {
            warn!(file = %path.display(), error = %err, "card.json is malformed, using the fallback card");
            None
        }
    }
}

fn non_empty(text: Option<String>) -> Option<String> {
    text.map(|text| text.trim().to_string()).filter(|text| !text.is_empty())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::test_logs::capture_logs;

    fn workspace(path: &Path) -> A2aWorkspace {
        A2aWorkspace {
            path: path.to_path_buf(),
            scope_prefix: "serve".into(),
            owner_id: "o".into(),
        }
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// The card JSON every card shares, with `name`, `description` and `skills` filled in.
    fn expected(name: &str, description: &str, skills: serde_json::Value) -> serde_json::Value {
        json!({
            "name": name,
            "description": description,
            "version": env!("CARGO_PKG_VERSION"),
            "supportedInterfaces": [
                {"url": "https://bot.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": "https://bot.example.com/a2a/v1", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
                {"url": "https://bot.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": "https://bot.example.com/a2a", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            ],
            "capabilities": {"streaming": true, "pushNotifications": true, "extendedAgentCard": true,
                "extensions": [{"uri": crate::binding::generations::GENERATIONS_EXTENSION,
                    "description": GENERATIONS_DESCRIPTION}]},
            "securitySchemes": {
                "apiKey": {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}},
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}},
            },
            "securityRequirements": [
                {"schemes": {"apiKey": {"list": []}}},
                {"schemes": {"bearer": {"list": []}}},
            ],
            "defaultInputModes": ["text/plain", "application/json", "application/octet-stream"],
            "defaultOutputModes": ["text/plain", "application/json"],
            "skills": skills,
        })
    }

    fn chat() -> serde_json::Value {
        json!([{"id": "chat", "name": "Chat", "description": "General assistant", "tags": ["chat"]}])
    }

    const BASE: &str = "https://bot.example.com";

    #[test]
    fn public_card_is_generic_and_exact() {
        let options = A2aOptions::default();
        let card = serde_json::to_value(public_card(&options, BASE)).unwrap();
        assert_eq!(card, expected(&options.card_name, &options.card_description, chat()));
    }

    #[test]
    fn base_url_table() {
        let public = A2aOptions {
            public_url: Some("https://bot.example.com/".into()),
            ..A2aOptions::default()
        };
        let unset = A2aOptions::default();
        let blank = A2aOptions { public_url: Some("  ".into()), ..A2aOptions::default() };
        let cases = [
            (&public, Some("evil.example"), Some("http"), "https://bot.example.com"),
            (&unset, Some("127.0.0.1:8080"), None, "http://127.0.0.1:8080"),
            (&unset, Some("bot.local"), Some("HTTPS, http"), "https://bot.local"),
            (&unset, Some("bot.local"), Some("gopher"), "http://bot.local"),
            (&unset, Some("[::1]:80"), None, "http://[::1]:80"),
            (&unset, Some("a/b@c"), None, "http://localhost"),
            (&unset, None, None, "http://localhost"),
            (&blank, Some("h"), None, "http://h"),
        ];
        for (options, host, proto, url) in cases {
            assert_eq!(base_url(options, host, proto), url, "{host:?} {proto:?}");
        }
    }

    #[test]
    fn extended_card_from_card_json() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("PERSONA.md"), "# Ada\n");
        write(
            &card_path(dir.path()),
            r#"{"name": "Eugene's assistant", "description": "Schedules meetings.", "color": "red",
                "skills": [{"id": "scheduling", "name": "Scheduling", "description": "Books rooms",
                            "tags": ["calendar"], "examples": ["book a room"], "extra": 1},
                           {"id": "misc", "name": "Misc"}]}"#,
        );
        let card = extended_card(&A2aOptions::default(), &workspace(dir.path()), BASE);
        let skills = json!([
            {"id": "scheduling", "name": "Scheduling", "description": "Books rooms",
             "tags": ["calendar"], "examples": ["book a room"]},
            {"id": "misc", "name": "Misc", "description": "", "tags": []},
        ]);
        assert_eq!(
            serde_json::to_value(card).unwrap(),
            expected("Eugene's assistant", "Schedules meetings.", skills)
        );
    }

    #[test]
    fn extended_card_missing_fields_fall_back_to_persona_then_options() {
        let dir = tempfile::tempdir().unwrap();
        let options = A2aOptions::default();
        let ws = workspace(dir.path());
        let card = serde_json::to_value(extended_card(&options, &ws, BASE)).unwrap();
        assert_eq!(card, expected(&options.card_name, &options.card_description, chat()));

        write(&dir.path().join("PERSONA.md"), "\n\n# Ada, Eugene's assistant\nMore.\n");
        write(&card_path(dir.path()), r#"{"name": "Ada", "description": " ", "skills": []}"#);
        let card = serde_json::to_value(extended_card(&options, &ws, BASE)).unwrap();
        assert_eq!(card, expected("Ada", "Ada, Eugene's assistant", chat()));
    }

    #[test]
    fn extended_card_malformed_card_json_falls_back_with_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("PERSONA.md"), "Ada");
        let options = A2aOptions::default();
        let ws = workspace(dir.path());
        for text in [
            r#"{"name": "Ada""#,
            r#"["not", "an", "object"]"#,
            r#"{"name": "Ada", "skills": "chat"}"#,
            r#"{"name": "Ada", "skills": [{"name": "no id"}]}"#,
        ] {
            write(&card_path(dir.path()), text);
            let mut card = None;
            let logs = capture_logs(|| card = Some(extended_card(&options, &ws, BASE)));
            let card = serde_json::to_value(card.unwrap()).unwrap();
            assert_eq!(card, expected(&options.card_name, "Ada", chat()), "{text}");
            assert!(logs.contains("card.json is malformed"), "{logs}");
            assert!(logs.contains(&card_path(dir.path()).display().to_string()), "{logs}");
        }
    }
}
