//! What sessions opened by one factory share.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::extension::{Extension, Registrar};
use crate::provider::ToolSpec;
use crate::provider::faux::FauxProvider;
use crate::tool::{ToolContext, ToolError, ToolOutput};

/// A tool with a given name, standing in for an extension's.
struct Named(&'static str);

#[async_trait::async_trait]
impl Tool for Named {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.0.into(),
            description: format!("the {} of the test extension", self.0),
            parameters: json!({"type": "object"}),
        }
    }

    async fn execute(&self, _args: Value, _ctx: ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError("not run in these tests".into()))
    }
}

/// Registers a secret and some tools, as the A2A extension does per caller.
struct Registers {
    secret: &'static str,
    tools: Vec<&'static str>,
}

impl Extension for Registers {
    fn name(&self) -> &str {
        "registers"
    }

    fn register(&self, registrar: &mut Registrar) {
        registrar.secret("caller-key", self.secret);
        for name in &self.tools {
            registrar.tool(Arc::new(Named(name)));
        }
    }
}

async fn open(
    factory: &SessionFactory,
    scope: &str,
    cwd: &Path,
    secret: &'static str,
    tools: Vec<&'static str>,
) -> Session {
    let mut options = SessionOptions::new(scope, cwd);
    options.extensions.push(Arc::new(Registers { secret, tools }));
    factory.open(options).await.unwrap()
}

#[tokio::test]
async fn sessions_with_the_same_secrets_share_one_redactor_and_others_get_their_own() {
    let (state, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let factory = SessionFactory::builder(Arc::new(FauxProvider::new()), state.path())
        .secret("provider", "sk-provider-secret-0123456789")
        .build();
    let one = "k_first_caller_key_0001";
    let two = "k_second_caller_key_0002";

    let a = open(&factory, "a", cwd.path(), one, vec![]).await;
    let b = open(&factory, "b", cwd.path(), one, vec![]).await;
    assert!(Arc::ptr_eq(&a.redactor(), &b.redactor()));

    let c = open(&factory, "c", cwd.path(), two, vec![]).await;
    assert!(!Arc::ptr_eq(&a.redactor(), &c.redactor()));
    let text = format!("{one} {two} sk-provider-secret-0123456789");
    assert_eq!(
        c.redactor().redact_values(&text),
        format!("{one} [REDACTED:caller-key] [REDACTED:provider]")
    );
    assert_eq!(
        a.redactor().redact_values(&text),
        format!("[REDACTED:caller-key] {two} [REDACTED:provider]")
    );

    // Back to the first secret after another: a redactor for it again, not the last one.
    let d = open(&factory, "d", cwd.path(), one, vec![]).await;
    assert_eq!(d.redactor().redact_values(one), "[REDACTED:caller-key]");
    assert_eq!(d.redactor().redact_values(two), two);
}

#[tokio::test]
async fn session_tool_specs_follow_the_tools_and_are_shared_when_made_from_the_same_tools() {
    let (state, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let factory = SessionFactory::builder(Arc::new(FauxProvider::new()), state.path()).build();
    let secret = "k_first_caller_key_0001";

    // An extension tool named like a built-in replaces it; a new one comes last.
    let a = open(&factory, "a", cwd.path(), secret, vec!["read", "ask"]).await;
    let names: Vec<String> = a.inner.specs.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["write", "edit", "bash", "ls", "grep", "find", "read", "ask"]);
    let fresh: Vec<ToolSpec> = a.inner.tools.iter().map(|t| t.spec()).collect();
    assert_eq!(&*a.inner.specs, fresh.as_slice(), "each spec is its tool's, in the tools' order");
    assert_eq!(a.inner.specs[6].description, "the read of the test extension");

    let b = open(&factory, "b", cwd.path(), secret, vec!["read", "ask"]).await;
    assert!(Arc::ptr_eq(&a.inner.specs, &b.inner.specs));

    let c = open(&factory, "c", cwd.path(), secret, vec!["ask"]).await;
    assert!(!Arc::ptr_eq(&a.inner.specs, &c.inner.specs));
    let names: Vec<String> = c.inner.specs.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names, ["read", "write", "edit", "bash", "ls", "grep", "find", "ask"]);
    let fresh: Vec<ToolSpec> = c.inner.tools.iter().map(|t| t.spec()).collect();
    assert_eq!(&*c.inner.specs, fresh.as_slice());
}
