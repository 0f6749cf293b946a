//! Signed agent cards (issue 21, item 1): the strict public card and the 1.0 extended card carry
//! JWS signatures that verify with the key of the server's JWK Set, fetched over HTTP.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ed25519_dalek::pkcs8::EncodePrivateKey;
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::{Signature, SigningKey, VerifyingKey};
use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;

use crate::support::*;

async fn get_json(server: &TestServer, path: &str, version: Option<&str>) -> (u16, Value) {
    let mut request = server.client.get(format!("{}{path}", server.base));
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn strict_card(server: &TestServer) -> Value {
    let (status, card) = get_json(server, "/.well-known/agent-card.json", Some("1.0")).await;
    assert_eq!(status, 200);
    card
}

async fn jwks(server: &TestServer) -> Value {
    let (status, jwks) = get_json(server, "/.well-known/jwks.json", None).await;
    assert_eq!(status, 200);
    jwks
}

/// Which of `card`'s signatures verify, as RFC 8785 over the card as received without its
/// `signatures`, with the key named by the signature's `kid` in `jwks`, whose URL `jku` must be.
fn verified(card: &Value, jwks: &Value, jku: &str) -> usize {
    let mut unsigned = card.clone();
    let signatures = unsigned.as_object_mut().unwrap().remove("signatures");
    let Some(Value::Array(signatures)) = signatures else { return 0 };
    let payload = URL_SAFE_NO_PAD.encode(serde_jcs::to_vec(&unsigned).unwrap());
    signatures
        .iter()
        .filter(|signature| {
            let protected = signature["protected"].as_str().unwrap();
            let header: Value =
                serde_json::from_slice(&URL_SAFE_NO_PAD.decode(protected).unwrap()).unwrap();
            assert_eq!(header["alg"], "EdDSA");
            assert_eq!(header["typ"], "JOSE");
            assert_eq!(header["jku"], jku);
            let Some(jwk) =
                jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == header["kid"])
            else {
                return false;
            };
            assert_eq!((&jwk["kty"], &jwk["crv"]), (&json!("OKP"), &json!("Ed25519")));
            assert!(jwk.get("d").is_none(), "the JWK Set holds no private key: {jwk}");
            let x: [u8; 32] =
                URL_SAFE_NO_PAD.decode(jwk["x"].as_str().unwrap()).unwrap().try_into().unwrap();
            let bytes: [u8; 64] = URL_SAFE_NO_PAD
                .decode(signature["signature"].as_str().unwrap())
                .unwrap()
                .try_into()
                .unwrap();
            let input = format!("{protected}.{payload}");
            VerifyingKey::from_bytes(&x)
                .unwrap()
                .verify_strict(input.as_bytes(), &Signature::from_bytes(&bytes))
                .is_ok()
        })
        .count()
}

/// The card with one byte of its name changed.
fn tampered(card: &Value) -> Value {
    let mut card = card.clone();
    let name = card["name"].as_str().unwrap().replacen('V', "W", 1);
    card["name"] = json!(name);
    card
}

#[tokio::test]
async fn signed_card_strict_and_extended_verify_with_the_served_jwks() {
    let server = TestServer::start().await;
    let jku = format!("{}/.well-known/jwks.json", server.base);
    let jwks = jwks(&server).await;
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 1, "{jwks}");

    let strict = strict_card(&server).await;
    assert_eq!(verified(&strict, &jwks, &jku), 1, "{strict}");
    assert_eq!(verified(&tampered(&strict), &jwks, &jku), 0);

    let rpc = server.rpc(KEY, "GetExtendedAgentCard", json!({})).await;
    let extended = rpc["result"].clone();
    assert_eq!(verified(&extended, &jwks, &jku), 1, "{extended}");
    assert_eq!(verified(&tampered(&extended), &jwks, &jku), 0);

    let (status, rest) = server.rest(KEY, reqwest::Method::GET, "/extendedAgentCard", None).await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(verified(&rest, &jwks, &jku), 1, "{rest}");
}

#[tokio::test]
async fn signed_card_blended_and_0_3_cards_carry_no_signatures() {
    let server = TestServer::start().await;
    let (_, blended) = get_json(&server, "/.well-known/agent-card.json", None).await;
    assert!(blended.get("signatures").is_none(), "{blended}");
    let rpc = server
        .rpc_versioned(KEY, Some("0.3"), "agent/getAuthenticatedExtendedCard", json!({}))
        .await;
    assert!(rpc["result"]["name"].is_string(), "{rpc}");
    assert!(rpc["result"].get("signatures").is_none(), "{rpc}");
}

#[tokio::test]
async fn signed_card_key_survives_a_restart() {
    // A fixed base URL, so the card (which names it) is the same across the restart's new port.
    let setup = || Setup {
        options: A2aOptions {
            public_url: Some("https://bot.example.com".into()),
            ..A2aOptions::default()
        },
        ..Setup::default()
    };
    let server = TestServer::with(setup()).await;
    let (jwks_before, card_before) = (jwks(&server).await, strict_card(&server).await);
    let jku = "https://bot.example.com/.well-known/jwks.json";
    assert_eq!(verified(&card_before, &jwks_before, jku), 1);
    let key_file = server.state.path().join("a2a/card-signing-key.pem");
    // The private key is a secret: scripts/scan-secrets fails the run if it reaches a log.
    for line in std::fs::read_to_string(&key_file).unwrap().lines() {
        if !line.starts_with("-----") {
            crate::test_logs::register_secret(line);
        }
    }
    let (workspace, extra, state) = server.stop().await;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let server = TestServer::start_in(workspace, extra, state, setup()).await;
    assert_eq!(jwks(&server).await, jwks_before, "the same key and kid");
    // Ed25519 signatures are deterministic: the same key signs the same card the same way.
    assert_eq!(strict_card(&server).await, card_before);
}

#[tokio::test]
async fn signed_card_with_a_key_file_given_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("owner-key.pem");
    let key = SigningKey::from_bytes(&[42u8; 32]);
    std::fs::write(&path, key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes()).unwrap();
    let options = A2aOptions { card_signing_key_file: Some(path), ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    let jwks = jwks(&server).await;
    assert_eq!(jwks["keys"][0]["x"], URL_SAFE_NO_PAD.encode(key.verifying_key().as_bytes()));
    let jku = format!("{}/.well-known/jwks.json", server.base);
    assert_eq!(verified(&strict_card(&server).await, &jwks, &jku), 1);
    // Nothing was created in the state folder.
    assert!(!server.state.path().join("a2a/card-signing-key.pem").exists());
}

#[tokio::test]
async fn signed_card_off_means_no_signatures_and_no_jwks() {
    let options = A2aOptions { card_signing: false, ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    assert!(strict_card(&server).await.get("signatures").is_none());
    let extended = server.rpc(KEY, "GetExtendedAgentCard", json!({})).await;
    assert!(extended["result"].get("signatures").is_none(), "{extended}");
    let (status, _) = get_json(&server, "/.well-known/jwks.json", None).await;
    assert_eq!(status, 404);
    assert!(!server.state.path().join("a2a/card-signing-key.pem").exists());
}
