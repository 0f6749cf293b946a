//! Which model provider to build, from `--faux`, the settings and the API-key variables.

use std::path::Path;
use std::sync::Arc;

use volcanic_core::provider::Provider;
use volcanic_core::provider::anthropic::{AnthropicConfig, AnthropicProvider};
use volcanic_core::provider::faux::{FauxProvider, FauxScript};
use volcanic_core::provider::openai::{OpenAiConfig, OpenAiProvider};

use crate::Failure;
use crate::config::{ProviderKind, ProviderSettings};

/// What to tell a user who has configured no provider.
const NO_PROVIDER: &str = "no model provider configured: set ANTHROPIC_API_KEY (Anthropic), or \
OPENAI_API_KEY (OpenAI), or Provider__Kind=openai with Provider__BaseUrl for a local \
OpenAI-compatible server (Ollama, vLLM, llama.cpp); or pass --faux to try Volcanic without a model";

/// A built provider and the secrets it holds (to redact everywhere).
pub struct Built {
    pub provider: Arc<dyn Provider>,
    pub secrets: Vec<(String, String)>,
}

/// Builds the provider.
///
/// # Errors
/// A usage failure (exit 2) saying what to set.
pub fn build(
    faux: bool,
    faux_script: Option<&Path>,
    settings: &ProviderSettings,
    env: &[(String, String)],
) -> Result<Built, Failure> {
    let var = |name: &str| {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).filter(|v| !v.is_empty())
    };
    if faux_script.is_some() && !faux && settings.kind != Some(ProviderKind::Faux) {
        return Err(Failure::usage("--faux-script needs --faux"));
    }
    let kind = if faux {
        ProviderKind::Faux
    } else if let Some(kind) = settings.kind {
        kind
    } else if var("ANTHROPIC_API_KEY").is_some() {
        ProviderKind::Anthropic
    } else if var("OPENAI_API_KEY").is_some() {
        ProviderKind::Openai
    } else {
        return Err(Failure::usage(NO_PROVIDER));
    };
    match kind {
        ProviderKind::Faux => {
            let mut provider = match faux_script {
                Some(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| {
                        Failure::usage(format!("--faux-script {}: {e}", path.display()))
                    })?;
                    let script = FauxScript::parse(&text).map_err(|e| {
                        Failure::usage(format!("--faux-script {}: {e}", path.display()))
                    })?;
                    FauxProvider::with_script(script)
                }
                None => FauxProvider::new(),
            };
            if let Some(window) = settings.context_window {
                provider = provider.with_context_window(window);
            }
            Ok(Built { provider: Arc::new(provider), secrets: Vec::new() })
        }
        ProviderKind::Anthropic => {
            let key = var("ANTHROPIC_API_KEY").ok_or_else(|| {
                Failure::usage("Provider__Kind is anthropic but ANTHROPIC_API_KEY is not set")
            })?;
            let mut config = AnthropicConfig::new(key.clone());
            if let Some(url) = &settings.base_url {
                config.base_url = url.clone();
            }
            if let Some(model) = &settings.model {
                config.model = model.clone();
            }
            let provider = AnthropicProvider::new(config)
                .map_err(|e| Failure::usage(format!("anthropic provider: {e}")))?;
            Ok(Built {
                provider: Arc::new(provider),
                secrets: vec![("ANTHROPIC_API_KEY".into(), key)],
            })
        }
        ProviderKind::Openai => {
            let key = var("OPENAI_API_KEY");
            if key.is_none() && settings.base_url.is_none() {
                return Err(Failure::usage(
                    "Provider__Kind is openai but neither OPENAI_API_KEY nor Provider__BaseUrl is set",
                ));
            }
            let mut config = OpenAiConfig { api_key: key.clone(), ..OpenAiConfig::default() };
            if let Some(url) = &settings.base_url {
                config.base_url = url.clone();
            }
            if let Some(model) = &settings.model {
                config.model = model.clone();
            }
            let provider = OpenAiProvider::new(config)
                .map_err(|e| Failure::usage(format!("openai provider: {e}")))?;
            let secrets = key.map(|k| vec![("OPENAI_API_KEY".into(), k)]).unwrap_or_default();
            Ok(Built { provider: Arc::new(provider), secrets })
        }
    }
}
