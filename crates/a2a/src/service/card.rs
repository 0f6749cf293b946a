//! GetExtendedAgentCard: the card built from the caller's workspace.

use a2a::AgentCard;

use crate::auth::Caller;
use crate::card;
use crate::error::A2aError;

use super::Service;

/// The extended card of the caller's workspace, as seen from `base`.
///
/// # Errors
/// [`A2aError::Internal`] when building the card panicked.
pub(super) async fn extended_card(
    service: &Service,
    caller: &Caller,
    base: String,
) -> Result<AgentCard, A2aError> {
    // Blocking: it reads card.json and PERSONA.md.
    let (options, workspace) = (service.options.clone(), caller.workspace.clone());
    tokio::task::spawn_blocking(move || card::extended_card(&options, &workspace, &base))
        .await
        .map_err(|err| {
            tracing::error!(error = %err, "building the extended card failed");
            A2aError::Internal
        })
}
