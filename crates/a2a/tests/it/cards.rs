//! The public card and the per-caller extended card.

use serde_json::{Value, json};

use crate::support::*;

async fn public(server: &TestServer) -> Value {
    server
        .client
        .get(format!("{}/.well-known/agent-card.json", server.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn card_public_is_generic() {
    let server = TestServer::start().await;
    std::fs::write(server.ws().join("PERSONA.md"), "Secret persona of the owner").unwrap();
    let card = public(&server).await;
    assert_eq!(card["name"], "Volcanic assistant");
    assert!(!card.to_string().contains("Secret persona"));
    let interfaces = card["supportedInterfaces"].as_array().unwrap();
    assert_eq!(
        interfaces[0],
        json!({"url": format!("{}/a2a", server.base), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    );
    assert_eq!(
        interfaces[1],
        json!({"url": format!("{}/a2a/v1", server.base), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"})
    );
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    assert!(card["securitySchemes"]["apiKey"].is_object());
    // The 0.3 fields of the blended card.
    assert_eq!(card["url"], format!("{}/a2a", server.base));
    assert_eq!(card["preferredTransport"], "JSONRPC");
}

#[tokio::test]
async fn card_extended_from_card_json() {
    let server = TestServer::start().await;
    std::fs::write(
        server.ws().join(".volcanic/a2a/card.json"),
        r#"{"name":"Eugene's assistant","description":"Schedules meetings.","skills":[{"id":"scheduling","name":"Scheduling","description":"Books meetings","tags":["calendar"]}]}"#,
    )
    .unwrap();
    let card = server.rpc(KEY, "GetExtendedAgentCard", json!({})).await["result"].clone();
    assert_eq!(card["name"], "Eugene's assistant");
    assert_eq!(card["description"], "Schedules meetings.");
    assert_eq!(card["skills"][0]["id"], "scheduling");
    assert!(card.get("kind").is_none() && card.get("url").is_none(), "1.0 shape only: {card}");
}

#[tokio::test]
async fn card_extended_falls_back_to_persona() {
    let server = TestServer::start().await;
    std::fs::write(server.ws().join("PERSONA.md"), "# Ada, Eugene's assistant\nMore.").unwrap();
    let card = server.rpc(KEY, "GetExtendedAgentCard", json!({})).await["result"].clone();
    assert_eq!(card["name"], "Volcanic assistant");
    assert_eq!(card["description"], "Ada, Eugene's assistant");
    let (status, rest) = server.rest(KEY, reqwest::Method::GET, "/extendedAgentCard", None).await;
    assert_eq!(status, 200);
    assert_eq!(rest["description"], "Ada, Eugene's assistant");
}

/// GET of the public card with `headers`: status, response headers, body (empty for a 304).
async fn get_card(
    server: &TestServer,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = server.client.get(format!("{}/.well-known/agent-card.json", server.base));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.unwrap())
}

/// The fields that exist only in 0.3 cards.
const V03_ONLY: [&str; 6] = [
    "url",
    "preferredTransport",
    "protocolVersion",
    "additionalInterfaces",
    "supportsAuthenticatedExtendedCard",
    "security",
];

#[tokio::test]
async fn card_for_a_1_0_request_is_strict_and_the_others_get_the_blended_card() {
    let server = TestServer::start().await;
    let (status, headers, body) = get_card(&server, &[("A2A-Version", "1.0")]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["vary"], "A2A-Version, Host, X-Forwarded-Proto");
    let strict: Value = serde_json::from_str(&body).unwrap();
    for field in V03_ONLY {
        assert!(strict.get(field).is_none(), "{field} in the strict card: {strict}");
    }
    // Security schemes only in the 1.0 shape: one key naming the scheme's kind.
    assert_eq!(
        strict["securitySchemes"]["apiKey"],
        json!({"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}})
    );
    assert_eq!(
        strict["securitySchemes"]["bearer"],
        json!({"httpAuthSecurityScheme": {"scheme": "Bearer"}})
    );
    let base = &server.base;
    assert_eq!(
        strict["supportedInterfaces"],
        json!([
            {"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": format!("{base}/a2a/v1"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": format!("{base}/a2a"), "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": format!("{base}/a2a"), "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
        ])
    );

    // No version, 0.3, or one we do not know: the blended card, for 1.0 and 0.3 clients alike.
    for headers in [vec![], vec![("A2A-Version", "0.3")], vec![("A2A-Version", "7.1")]] {
        let (status, answer_headers, body) = get_card(&server, &headers).await;
        assert_eq!(status, 200, "{headers:?}");
        assert_eq!(answer_headers["vary"], "A2A-Version, Host, X-Forwarded-Proto");
        let blended: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(blended["protocolVersion"], "0.3.0", "{headers:?}");
        assert_eq!(blended["securitySchemes"]["apiKey"]["type"], "apiKey");
        assert_eq!(blended["supportedInterfaces"], strict["supportedInterfaces"]);
        // Both 0.3 interfaces, for 0.3 clients: JSON-RPC preferred, HTTP+JSON at the same URL
        // (a 0.3 REST client appends `/v1/message:send` to it).
        assert_eq!(blended["url"], format!("{base}/a2a"));
        assert_eq!(blended["preferredTransport"], "JSONRPC");
        assert_eq!(
            blended["additionalInterfaces"],
            json!([
                {"url": format!("{base}/a2a"), "transport": "JSONRPC"},
                {"url": format!("{base}/a2a"), "transport": "HTTP+JSON"},
            ])
        );
    }
}

#[tokio::test]
async fn card_has_validators_and_answers_304_when_unchanged() {
    let server = TestServer::start().await;
    let (_, headers, body) = get_card(&server, &[]).await;
    let etag = headers["etag"].to_str().unwrap().to_string();
    let modified = headers["last-modified"].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2, "{etag}");
    assert!(modified.ends_with(" GMT"), "{modified}");
    assert_eq!(headers["cache-control"], "private, max-age=300");
    assert!(!body.is_empty());

    // The same card again: 304 without a body, with the validators.
    for conditional in [
        vec![("If-None-Match", etag.as_str())],
        vec![("If-Modified-Since", modified.as_str())],
        vec![("If-Modified-Since", "Fri, 31 Dec 2100 23:59:59 GMT")],
    ] {
        let (status, headers, body) = get_card(&server, &conditional).await;
        assert_eq!(status, 304, "{conditional:?}");
        assert_eq!(body, "", "{conditional:?}");
        assert_eq!(headers["etag"].to_str().unwrap(), etag);
        assert_eq!(headers["vary"], "A2A-Version, Host, X-Forwarded-Proto");
    }
    let weak = format!("\"other\", W/{etag}");
    assert_eq!(get_card(&server, &[("If-None-Match", &weak)]).await.0, 304);

    // A different card, an older date, or an ETag that does not match (which wins over a
    // matching date): the full card.
    let (status, strict_headers, _) =
        get_card(&server, &[("A2A-Version", "1.0"), ("If-None-Match", &etag)]).await;
    assert_eq!(status, 200, "the strict card has its own ETag");
    assert_ne!(strict_headers["etag"].to_str().unwrap(), etag);
    let old = "Thu, 01 Jan 2015 00:00:00 GMT";
    assert_eq!(get_card(&server, &[("If-Modified-Since", old)]).await.0, 200);
    let both = [("If-None-Match", "\"other\""), ("If-Modified-Since", modified.as_str())];
    assert_eq!(get_card(&server, &both).await.0, 200);
    assert_eq!(get_card(&server, &[("If-Modified-Since", "yesterday")]).await.0, 200);
}

/// The values of a comma-separated header, lower-cased.
fn header_list(headers: &reqwest::header::HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|value| value.to_str().unwrap().split(','))
        .map(|item| item.trim().to_ascii_lowercase())
        .collect()
}

#[tokio::test]
async fn a_card_built_from_the_request_is_kept_out_of_shared_caches() {
    // Without A2A__PublicUrl the interfaces (and the signatures' jku) follow Host and
    // X-Forwarded-Proto: a shared cache that stored one request's card must not serve it to a
    // request for another host or scheme.
    let server = TestServer::start().await;
    for (host, proto) in [("a.example", "https"), ("b.example:8443", "http")] {
        let headers = [("A2A-Version", "1.0"), ("Host", host), ("X-Forwarded-Proto", proto)];
        let (status, headers, body) = get_card(&server, &headers).await;
        assert_eq!(status, 200);
        let card: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(card["supportedInterfaces"][0]["url"], format!("{proto}://{host}/a2a"));
        let cache = header_list(&headers, "cache-control");
        assert!(cache.contains(&"private".to_string()), "{cache:?}");
        assert!(!cache.contains(&"public".to_string()), "{cache:?}");
        let vary = header_list(&headers, "vary");
        for name in ["a2a-version", "host", "x-forwarded-proto"] {
            assert!(vary.contains(&name.to_string()), "{name} in {vary:?}");
        }
    }

    // With a public URL the card is the same for every request: public, varying by version only.
    let options = volcanic_a2a::A2aOptions {
        public_url: Some("https://bot.example".into()),
        ..volcanic_a2a::A2aOptions::default()
    };
    let fixed = TestServer::with(Setup { options, ..Setup::default() }).await;
    let (_, headers, body) = get_card(&fixed, &[("Host", "evil.example")]).await;
    assert!(body.contains("https://bot.example/a2a") && !body.contains("evil"), "{body}");
    assert_eq!(headers["cache-control"], "public, max-age=300");
    assert_eq!(headers["vary"], "A2A-Version");
}
