//! Owner approval of single tool calls (callers.json `approveTools`; docs/a2a.md, "Owner
//! approval"): the core's tool gate of a caller's session. The records and decisions are
//! `approval.rs` and `approve.rs`; this file is what a waiting call does to its task.

use std::sync::Arc;

use a2a::TaskState;

use crate::approval::{
    Decision, PendingApproval, REQUEST_CHARS, cut, describe, millis_now, new_id,
};
use crate::auth::Caller;

use super::Service;

/// The gate of a caller's session whose callers.json entry names tools (`approveTools`): a
/// call of one of them waits for the owner. The task shows AUTH_REQUIRED with the call
/// (redacted) while it waits, which ends its streams (the caller resubscribes); the owner's yes
/// runs the call, a no or the time running out returns a refusal to the model, and the run goes
/// on. A cancel of the task ends the wait at once (the core drops it) and the request with it.
pub(crate) struct ToolApproval {
    service: std::sync::Weak<Service>,
    caller: Caller,
    channel: Arc<crate::run::extension::A2aChatChannel>,
}

impl ToolApproval {
    pub(crate) fn new(
        service: std::sync::Weak<Service>,
        caller: Caller,
        channel: Arc<crate::run::extension::A2aChatChannel>,
    ) -> Self {
        ToolApproval { service, caller, channel }
    }
}

/// Takes a waiting tool call's request out when its wait ends in any way (decided, timed out,
/// or dropped by a cancel).
struct Waiting {
    approvals: Arc<crate::approval::Approvals>,
    id: String,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        // A decided request is gone already; this finds nothing then. Files: a small blocking
        // removal, once per tool call that needed the owner.
        let _ = self.approvals.take(&self.id);
        let _ = self.approvals.wake(&self.id, Decision::Deny { reason: None });
    }
}

#[async_trait::async_trait]
impl volcanic_core::extension::ToolGate for ToolApproval {
    async fn check(
        &self,
        call: &volcanic_core::extension::GateCall,
    ) -> volcanic_core::extension::GateDecision {
        use volcanic_core::extension::GateDecision;
        if !self.caller.approval.tool_needs_approval(&call.name) {
            return GateDecision::Allow;
        }
        let refuse = |reason: &str| GateDecision::Refuse { reason: reason.to_string() };
        let Some(service) = self.service.upgrade() else {
            return refuse("the server is stopping");
        };
        let Ok(live) = self.channel.target() else {
            return refuse("no task is running to ask the owner for");
        };
        let redactor = live.redactor();
        let shown = redactor.redact(&format!("{} {}", call.name, call.args)).into_owned();
        let shown = cut(&shown, REQUEST_CHARS);
        let requested_at = millis_now();
        let timeout = service.options.approval_timeout;
        let record = PendingApproval {
            id: new_id(),
            workspace: self.caller.workspace.path.clone(),
            caller: self.caller.name.clone(),
            task_id: live.task_id.clone(),
            context_id: live.context_id.clone(),
            hops: 0,
            requested_at,
            expires_at: requested_at
                .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            request: shown.clone(),
            tool: Some(call.name.clone()),
            question: None,
        };
        let decided = service.approvals.wait(&record.id);
        let _waiting = Waiting { approvals: service.approvals.clone(), id: record.id.clone() };
        let approvals = service.approvals.clone();
        let stored = record.clone();
        let added =
            tokio::task::spawn_blocking(move || approvals.add(stored, None, u64::MAX)).await;
        if !matches!(added, Ok(Ok(()))) {
            tracing::error!(tool = %call.name, "cannot record a tool call's approval request; the call is refused");
            return refuse("the owner's approval could not be asked for");
        }
        live.set_status(
            TaskState::AuthRequired,
            Some(format!("Waiting for the owner's approval to run {shown}")),
        )
        .await;
        tracing::info!(approval = %record.id, caller = %self.caller.name, task_id = %record.task_id, tool = %call.name, "a tool call waits for the owner's approval: volcanic approve {} (or deny)", record.id);
        if let Some(notifier) = service.approval_notifier.clone() {
            let (caller, notice) = (self.caller.clone(), record.clone());
            service.tracker.spawn(async move { notifier.requested(&caller, &notice).await });
        }
        let outcome = tokio::time::timeout(timeout, decided).await;
        if outcome.is_err() {
            service.approval_settled(&record.id, crate::approval::Settled::TimedOut);
        }
        live.set_status(TaskState::Working, Some(format!("using {}", call.name))).await;
        match outcome {
            Ok(Ok(Decision::Approve)) => GateDecision::Allow,
            Ok(Ok(Decision::Deny { reason })) => match reason {
                Some(reason) => refuse(&format!("the owner declined this call: {reason}")),
                None => refuse("the owner declined this call"),
            },
            Ok(Err(_)) => refuse("the owner's approval was not given"),
            Err(_) => refuse(&format!("no decision from the owner within {}", describe(timeout))),
        }
    }
}
