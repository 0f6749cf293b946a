//! The session a caller's context runs in, assembled for a run whose reservation found it
//! closed: the workspace's push secrets loaded before any of its sessions can see them, and the
//! session's A2A extension (the caller, the owner's notifier, the secrets to redact, the gate of
//! the tool calls that wait for the owner, the usage meter).

use std::sync::Arc;

use crate::auth::Caller;
use crate::run::extension::{A2aChatChannel, A2aSessionExtension, WorkspaceSecrets};
use crate::run::pool::{Claim, Opening};

use super::Service;
use super::tool_approval::ToolApproval;

/// Opens the session `opening` reserved for `caller`; `None` when it could not be opened
/// (logged by the pool), and the context is free again.
pub(super) async fn open(
    service: &Arc<Service>,
    caller: &Caller,
    opening: Opening,
) -> Option<Claim> {
    // The push secrets of task files written before this process started are read once per
    // workspace, before its first session can see them.
    let push_secrets = service.tasks.store().push_secrets().clone();
    if !push_secrets.is_loaded(&caller.workspace.path) {
        let path = caller.workspace.path.clone();
        let loaded = tokio::task::spawn_blocking(move || push_secrets.load(&path)).await;
        if loaded.is_err() {
            // The run's span names the task.
            tracing::error!("reading push secrets panicked");
        }
    }
    let caller = caller.clone();
    let notifier = service.notifier.clone();
    let meter = Some(service.meter.clone());
    let secrets: Arc<dyn volcanic_core::redact::SecretSource> = Arc::new(WorkspaceSecrets::new(
        service.directory.clone(),
        caller.workspace.clone(),
        service.tasks.store().push_secrets().clone(),
    ));
    let service = Arc::downgrade(service);
    let extension = move |channel: &Arc<A2aChatChannel>| -> Arc<dyn volcanic_core::Extension> {
        // Calls of the tools the caller's entry names wait for the owner.
        let gate = (!caller.approval.tools.is_empty()).then(|| {
            Arc::new(ToolApproval::new(service, caller.clone(), channel.clone()))
                as Arc<dyn volcanic_core::extension::ToolGate>
        });
        Arc::new(A2aSessionExtension { caller, notifier, secrets, gate, meter })
    };
    opening.open(extension).await.ok()
}
