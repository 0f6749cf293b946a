//! Owner approval of callers' tasks (issue 22): a task that needs the owner's yes waits in
//! `TASK_STATE_AUTH_REQUIRED` without reaching the model; a decision through the control socket
//! (what `volcanic approve` and `deny` send) starts its run or rejects it; no decision in time
//! rejects it; the request survives a restart.

use std::time::Duration;

use serde_json::{Value, json};
use volcanic_a2a::A2aOptions;
use volcanic_a2a::control::{self, ControlRequest};

use crate::support::{DEADLINE, KEY, OTHER_KEY, Setup, TestServer, directive, send_params};

/// callers.json with travel-bot on `every-task` and other-bot on `first-contact`.
fn approving_callers(server: &TestServer) {
    let list = json!([
        {"name": "travel-bot", "key": KEY, "approval": "every-task"},
        {"name": "other-bot", "key": OTHER_KEY, "approval": "first-contact"},
    ]);
    let path = server.ws().join(".volcanic/a2a/callers.json");
    std::fs::write(path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
}

/// One request to the control socket: the answer as it crosses the socket.
async fn control(server: &TestServer, request: ControlRequest) -> Value {
    let socket = control::socket_path(server.state.path());
    let answer = tokio::time::timeout(DEADLINE, control::request(&socket, &request))
        .await
        .expect("the control socket answers")
        .expect("the control socket is there");
    serde_json::to_value(answer).unwrap()
}

async fn pending(server: &TestServer) -> Vec<Value> {
    let answer = control(server, ControlRequest::List).await;
    assert_eq!(answer["ok"], true, "{answer}");
    answer["approvals"].as_array().unwrap().clone()
}

fn state(task: &Value) -> &str {
    task["status"]["state"].as_str().unwrap_or_default()
}

fn status_text(task: &Value) -> String {
    task["status"]["message"]["parts"][0]["text"].as_str().unwrap_or_default().to_string()
}

/// GetTask until the task is in `wanted` (bounded by [`DEADLINE`]).
async fn wait_for_state(server: &TestServer, key: &str, id: &str, wanted: &str) -> Value {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        let task = server.rpc(key, "GetTask", json!({"id": id})).await["result"].clone();
        if state(&task) == wanted {
            return task;
        }
        assert!(tokio::time::Instant::now() < deadline, "never {wanted}: {task}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends `text` as `key`'s caller; the task the blocking answer shows.
async fn send_as(server: &TestServer, key: &str, text: &str, extra: Option<Value>) -> Value {
    let answer = server.rpc(key, "SendMessage", send_params(text, extra)).await;
    answer.get("result").map(|r| r["task"].clone()).unwrap_or_else(|| panic!("{answer}"))
}

#[tokio::test]
async fn an_every_task_caller_waits_for_the_owner_and_runs_once_approved() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let prompt = directive(json!([{"text": "approved answer"}]));
    let task = send_as(&server, KEY, &prompt, None).await;
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task}");
    assert_eq!(status_text(&task), "Waiting for the owner's approval.");
    let id = task["id"].as_str().unwrap();
    assert!(server.faux.requests().is_empty(), "nothing reaches the model before approval");

    let waiting = pending(&server).await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["caller"], "travel-bot");
    assert_eq!(waiting[0]["taskId"], id);
    assert!(waiting[0]["request"].as_str().unwrap().contains("approved answer"));
    let approval = waiting[0]["id"].as_str().unwrap().to_string();

    let decided = control(&server, ControlRequest::Approve { id: approval.clone() }).await;
    assert_eq!(decided["ok"], true, "{decided}");
    assert_eq!(decided["decided"]["taskId"], id);
    let done = wait_for_state(&server, KEY, id, "TASK_STATE_COMPLETED").await;
    assert!(done.to_string().contains("approved answer"), "{done}");
    assert!(pending(&server).await.is_empty());
    // Decided once: a second decision finds nothing.
    let again = control(&server, ControlRequest::Deny { id: approval, reason: None }).await;
    assert_eq!(again["ok"], false);
    assert!(again["error"].as_str().unwrap().contains("no approval request"), "{again}");
}

#[tokio::test]
async fn a_denied_request_is_rejected_with_the_owners_reason_and_never_runs() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let task = send_as(&server, KEY, "book me a flight", None).await;
    let id = task["id"].as_str().unwrap();
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    let reason = Some("not this week".to_string());
    let decided = control(&server, ControlRequest::Deny { id: approval, reason }).await;
    assert_eq!(decided["decided"]["state"], "rejected", "{decided}");
    let task = wait_for_state(&server, KEY, id, "TASK_STATE_REJECTED").await;
    assert!(status_text(&task).contains("not this week"), "{task}");
    assert!(server.faux.requests().is_empty());
}

#[tokio::test]
async fn a_request_nobody_decides_is_rejected_when_its_time_runs_out() {
    let options =
        A2aOptions { approval_timeout: Duration::from_millis(300), ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    approving_callers(&server);
    let task = send_as(&server, KEY, "anyone there?", None).await;
    let task =
        wait_for_state(&server, KEY, task["id"].as_str().unwrap(), "TASK_STATE_REJECTED").await;
    assert!(status_text(&task).contains("no decision from the owner"), "{task}");
    assert!(pending(&server).await.is_empty());
    assert!(server.faux.requests().is_empty());
}

#[tokio::test]
async fn a_waiting_request_survives_a_restart_and_its_approval_runs_the_task() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let prompt = directive(json!([{"text": "after the restart"}]));
    let task = send_as(&server, KEY, &prompt, None).await;
    let id = task["id"].as_str().unwrap().to_string();
    let (workspace, extra, state_dir) = server.stop().await;
    let server = TestServer::start_in(workspace, extra, state_dir, Setup::default()).await;
    let waiting = pending(&server).await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    let task = server.rpc(KEY, "GetTask", json!({"id": id})).await["result"].clone();
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "not failed as 'server restarted'");
    let approval = waiting[0]["id"].as_str().unwrap().to_string();
    let decided = control(&server, ControlRequest::Approve { id: approval }).await;
    assert_eq!(decided["ok"], true, "{decided}");
    let done = wait_for_state(&server, KEY, &id, "TASK_STATE_COMPLETED").await;
    assert!(done.to_string().contains("after the restart"), "{done}");
}

#[tokio::test]
async fn while_a_task_waits_its_context_is_busy_it_takes_no_message_and_cancel_ends_it() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let task = send_as(&server, KEY, "first", Some(json!({"contextId": "trip"}))).await;
    let id = task["id"].as_str().unwrap().to_string();

    let busy = server
        .rpc(KEY, "SendMessage", send_params("second", Some(json!({"contextId": "trip"}))))
        .await;
    assert_eq!(busy["error"]["code"], -32004, "{busy}");
    let to_task =
        server.rpc(KEY, "SendMessage", send_params("more", Some(json!({"taskId": id})))).await;
    assert_eq!(to_task["error"]["code"], -32004, "{to_task}");
    assert!(
        to_task["error"]["message"].as_str().unwrap().contains("waiting for the owner's approval")
    );

    let canceled = server.rpc(KEY, "CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled["result"]), "TASK_STATE_CANCELED", "{canceled}");
    assert!(pending(&server).await.is_empty(), "a canceled task waits no more");
    // The context is free again (for a task that waits in turn).
    let next = send_as(&server, KEY, "third", Some(json!({"contextId": "trip"}))).await;
    assert_eq!(state(&next), "TASK_STATE_AUTH_REQUIRED");
    assert!(server.faux.requests().is_empty());
}

#[tokio::test]
async fn a_first_contact_caller_is_asked_once_also_across_a_restart() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let task = send_as(&server, OTHER_KEY, "hello, I am new", None).await;
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED");
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    control(&server, ControlRequest::Approve { id: approval }).await;
    wait_for_state(&server, OTHER_KEY, task["id"].as_str().unwrap(), "TASK_STATE_COMPLETED").await;

    let second = send_as(&server, OTHER_KEY, "me again", None).await;
    assert_eq!(state(&second), "TASK_STATE_COMPLETED", "approved once: {second}");
    let (workspace, extra, state_dir) = server.stop().await;
    let server = TestServer::start_in(workspace, extra, state_dir, Setup::default()).await;
    let third = send_as(&server, OTHER_KEY, "and after a restart", None).await;
    assert_eq!(state(&third), "TASK_STATE_COMPLETED", "{third}");
    // travel-bot (every-task) still waits every time.
    assert_eq!(state(&send_as(&server, KEY, "me?", None).await), "TASK_STATE_AUTH_REQUIRED");
}

#[tokio::test]
async fn a_stream_ends_at_auth_required_and_0_3_marks_it_final() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let events = server
        .rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params("stream me", None))
        .await;
    let last = &events.last().unwrap()["result"];
    let status = last.get("statusUpdate").map_or_else(|| &last["task"]["status"], |u| &u["status"]);
    assert_eq!(status["state"], "TASK_STATE_AUTH_REQUIRED", "{events:?}");

    let events = server
        .rpc_stream(
            KEY,
            None,
            "message/stream",
            json!({"message": {"kind": "message", "messageId": crate::support::uuid(), "role": "user",
                "parts": [{"kind": "text", "text": "old client"}]}}),
        )
        .await;
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["kind"], "status-update", "{events:?}");
    assert_eq!(last["status"]["state"], "auth-required");
    assert_eq!(last["final"], true);
}

#[tokio::test]
async fn the_control_socket_refuses_what_is_not_a_waiting_request() {
    let server = TestServer::start().await;
    let bad = control(&server, ControlRequest::Approve { id: "../../etc".into() }).await;
    assert_eq!(bad["ok"], false);
    let unknown = control(&server, ControlRequest::Approve { id: "0123abcd".into() }).await;
    assert_eq!(unknown["ok"], false);
    assert!(unknown["error"].as_str().unwrap().contains("no approval request"), "{unknown}");
    // Owner-only: the socket is 0600 in a 0700 folder.
    use std::os::unix::fs::PermissionsExt;
    let socket = control::socket_path(server.state.path());
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let folder = std::fs::metadata(socket.parent().unwrap()).unwrap().permissions().mode() & 0o777;
    assert_eq!(folder, 0o700);
}

#[tokio::test]
async fn push_configs_hear_every_transition_of_an_approved_task() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let webhook = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/hook"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&webhook)
        .await;
    let options = A2aOptions { allow_private_push_urls: true, ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    approving_callers(&server);
    let mut params = send_params("push me along", None);
    params["configuration"] = json!({"taskPushNotificationConfig": {
        "url": format!("{}/hook", webhook.uri()), "token": "tok-1234567"}});
    let task = server.rpc(KEY, "SendMessage", params).await["result"]["task"].clone();
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task}");
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    control(&server, ControlRequest::Approve { id: approval }).await;
    let states = tokio::time::timeout(DEADLINE, async {
        loop {
            let states: Vec<String> = webhook
                .received_requests()
                .await
                .unwrap_or_default()
                .iter()
                .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
                .map(|b| b["task"]["status"]["state"].as_str().unwrap_or_default().to_string())
                .collect();
            if states.last().is_some_and(|s| s == "TASK_STATE_COMPLETED") {
                return states;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the completed push arrives");
    assert_eq!(
        states,
        ["TASK_STATE_AUTH_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        "in order, one per state change"
    );
}

/// callers.json with travel-bot's `write` calls waiting for the owner (its tasks need no
/// approval).
fn approving_writes(server: &TestServer) {
    let list = json!([
        {"name": "travel-bot", "key": KEY, "approveTools": ["write"]},
        {"name": "other-bot", "key": OTHER_KEY},
    ]);
    let path = server.ws().join(".volcanic/a2a/callers.json");
    std::fs::write(path, serde_json::to_vec_pretty(&list).unwrap()).unwrap();
}

fn write_then_answer(file: &str) -> String {
    directive(json!([
        {"tool": "write", "args": {"path": file, "content": "written"}},
        {"text": "after the call"},
    ]))
}

#[tokio::test]
async fn a_tool_call_waits_for_the_owner_and_runs_once_approved() {
    let server = TestServer::start().await;
    approving_writes(&server);
    let task = send_as(&server, KEY, &write_then_answer("approved.txt"), None).await;
    // A blocking answer goes out at the pause: AUTH_REQUIRED, naming the call.
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task}");
    assert!(status_text(&task).contains("write"), "{task}");
    let id = task["id"].as_str().unwrap().to_string();
    assert!(!server.ws().join("approved.txt").exists(), "nothing runs before the owner's yes");
    // While it waits, a message to the task is refused.
    let more =
        server.rpc(KEY, "SendMessage", send_params("more", Some(json!({"taskId": id})))).await;
    assert_eq!(more["error"]["code"], -32004, "{more}");

    let waiting = pending(&server).await;
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0]["tool"], "write");
    assert!(waiting[0]["request"].as_str().unwrap().contains("approved.txt"));
    let approval = waiting[0]["id"].as_str().unwrap().to_string();
    let decided = control(&server, ControlRequest::Approve { id: approval }).await;
    assert_eq!(decided["ok"], true, "{decided}");
    let done = wait_for_state(&server, KEY, &id, "TASK_STATE_COMPLETED").await;
    assert!(done.to_string().contains("after the call"), "{done}");
    assert_eq!(std::fs::read_to_string(server.ws().join("approved.txt")).unwrap(), "written");
    assert!(pending(&server).await.is_empty());
}

#[tokio::test]
async fn a_tool_call_the_owner_denies_is_refused_to_the_model_and_the_run_goes_on() {
    let server = TestServer::start().await;
    approving_writes(&server);
    let task = send_as(&server, KEY, &write_then_answer("denied.txt"), None).await;
    let id = task["id"].as_str().unwrap().to_string();
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    let reason = Some("not in my folder".to_string());
    control(&server, ControlRequest::Deny { id: approval, reason }).await;
    wait_for_state(&server, KEY, &id, "TASK_STATE_COMPLETED").await;
    assert!(!server.ws().join("denied.txt").exists());
    // The model saw the refusal as the tool's result.
    let requests = server.faux.requests();
    let seen = format!("{:?}", requests.last().unwrap());
    assert!(seen.contains("the owner declined this call: not in my folder"), "{seen}");
}

#[tokio::test]
async fn a_tool_call_nobody_decides_is_refused_when_its_time_runs_out() {
    let options =
        A2aOptions { approval_timeout: Duration::from_millis(300), ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    approving_writes(&server);
    let task = send_as(&server, KEY, &write_then_answer("late.txt"), None).await;
    wait_for_state(&server, KEY, task["id"].as_str().unwrap(), "TASK_STATE_COMPLETED").await;
    assert!(!server.ws().join("late.txt").exists());
    let seen = format!("{:?}", server.faux.requests().last().unwrap());
    assert!(seen.contains("no decision from the owner"), "{seen}");
    assert!(pending(&server).await.is_empty());
}

#[tokio::test]
async fn canceling_a_task_whose_tool_call_waits_cancels_it_and_drops_the_request() {
    let server = TestServer::start().await;
    approving_writes(&server);
    let task = send_as(&server, KEY, &write_then_answer("never.txt"), None).await;
    let id = task["id"].as_str().unwrap().to_string();
    assert_eq!(pending(&server).await.len(), 1);
    let canceled = server.rpc(KEY, "CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled["result"]), "TASK_STATE_CANCELED", "{canceled}");
    assert!(pending(&server).await.is_empty());
    assert!(!server.ws().join("never.txt").exists());
}

#[tokio::test]
async fn after_a_tool_call_is_approved_a_resubscription_follows_the_run_to_its_end() {
    let server = TestServer::start().await;
    approving_writes(&server);
    let script = directive(json!([
        {"tool": "write", "args": {"path": "streamed.txt", "content": "x"}},
        {"text": "a slow answer after the approved call", "chunk": 2, "delay_ms": 40},
    ]));
    // The stream ends at the pause.
    let events = server
        .rpc_stream(KEY, Some("1.0"), "SendStreamingMessage", send_params(&script, None))
        .await;
    let last = &events.last().unwrap()["result"];
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_AUTH_REQUIRED", "{events:?}");
    let id = events[0]["result"]["task"]["id"].as_str().unwrap().to_string();
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    control(&server, ControlRequest::Approve { id: approval }).await;
    // The run goes on (about 0.7 s of answer): a new subscription follows it to the end.
    let followed = server.subscribe_or_refusal(KEY, &id).await;
    let last = &followed.last().unwrap()["result"];
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED", "{followed:?}");
    assert!(format!("{followed:?}").contains("slow answer"), "{followed:?}");
}

#[tokio::test]
async fn a_caller_may_have_at_most_32_tasks_waiting_and_a_decision_makes_room() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let mut first = None;
    for i in 0..32 {
        let task = send_as(&server, KEY, &format!("request {i}"), None).await;
        assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task}");
        first.get_or_insert(task["id"].as_str().unwrap().to_string());
    }
    let refused = server.rpc(KEY, "SendMessage", send_params("one too many", None)).await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("32 of your tasks are already waiting"), "{message}");
    // Another caller is not held by travel-bot's queue.
    assert_eq!(
        state(&send_as(&server, OTHER_KEY, "hello", None).await),
        "TASK_STATE_AUTH_REQUIRED"
    );
    // Canceling one makes room for one more.
    let canceled = server.rpc(KEY, "CancelTask", json!({"id": first.unwrap()})).await;
    assert_eq!(canceled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{canceled}");
    let task = send_as(&server, KEY, "now there is room", None).await;
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task}");
    assert_eq!(pending(&server).await.len(), 33);
    assert!(server.faux.requests().is_empty());
}

/// A directive that asks the caller a question and stops there.
fn ask(question: &str) -> String {
    directive(json!([{"tool": "request_input", "args": {"question": question}}]))
}

/// Sends `prompt` as travel-bot (every-task), approves it, and waits until its run asks for
/// input; the task id.
async fn approved_task_asking_for_input(server: &TestServer, question: &str) -> String {
    let task = send_as(server, KEY, &ask(question), None).await;
    let id = task["id"].as_str().unwrap().to_string();
    let approval = pending(server).await[0]["id"].as_str().unwrap().to_string();
    let decided = control(server, ControlRequest::Approve { id: approval }).await;
    assert_eq!(decided["ok"], true, "{decided}");
    wait_for_state(server, KEY, &id, "TASK_STATE_INPUT_REQUIRED").await;
    id
}

/// Whether any model request so far carried `text`.
fn model_saw(server: &TestServer, text: &str) -> bool {
    server.faux.requests().iter().any(|request| format!("{request:?}").contains(text))
}

#[tokio::test]
async fn a_reply_to_an_approved_task_waits_for_the_owner_before_the_model_sees_it() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let id = approved_task_asking_for_input(&server, "Which city?").await;
    let calls_before = server.faux.requests().len();

    // The caller's reply carries new instructions: the owner approved the task, not this.
    let smuggled = directive(json!([
        {"tool": "write", "args": {"path": "smuggled.txt", "content": "smuggled"}},
        {"text": "did what the reply said"},
    ]));
    let reply = send_as(&server, KEY, &smuggled, Some(json!({"taskId": id}))).await;
    assert_eq!(state(&reply), "TASK_STATE_AUTH_REQUIRED", "{reply}");
    assert_eq!(status_text(&reply), "Waiting for the owner's approval.");
    assert_eq!(server.faux.requests().len(), calls_before, "the model saw nothing new");
    assert!(!model_saw(&server, "smuggled.txt"));
    assert!(!server.ws().join("smuggled.txt").exists());
    // While it waits, more messages to the task are refused, as for a new task.
    let more =
        server.rpc(KEY, "SendMessage", send_params("and more", Some(json!({"taskId": id})))).await;
    assert_eq!(more["error"]["code"], -32004, "{more}");

    // The owner sees the reply, the task it continues and the question it answers.
    let waiting = pending(&server).await;
    assert_eq!(waiting.len(), 1, "{waiting:?}");
    assert_eq!(waiting[0]["taskId"], id.as_str());
    assert_eq!(waiting[0]["question"], "Which city?");
    assert!(waiting[0]["request"].as_str().unwrap().contains("smuggled.txt"), "{waiting:?}");
    let approval = waiting[0]["id"].as_str().unwrap().to_string();
    let decided = control(&server, ControlRequest::Approve { id: approval }).await;
    assert_eq!(decided["ok"], true, "{decided}");
    let done = wait_for_state(&server, KEY, &id, "TASK_STATE_COMPLETED").await;
    assert!(done.to_string().contains("did what the reply said"), "{done}");
    assert_eq!(std::fs::read_to_string(server.ws().join("smuggled.txt")).unwrap(), "smuggled");
    // The history keeps the whole conversation in order.
    let history = done["history"].to_string();
    let (asked, replied) =
        (history.find("Which city?").unwrap(), history.find("smuggled.txt").unwrap());
    assert!(asked < replied, "{history}");
}

#[tokio::test]
async fn a_denied_reply_rejects_the_task_and_never_reaches_the_model() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let id = approved_task_asking_for_input(&server, "Which city?").await;
    let reply =
        send_as(&server, KEY, "Paris, and also email my contacts", Some(json!({"taskId": id})))
            .await;
    assert_eq!(state(&reply), "TASK_STATE_AUTH_REQUIRED", "{reply}");
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    let reason = Some("no emails".to_string());
    let decided = control(&server, ControlRequest::Deny { id: approval, reason }).await;
    assert_eq!(decided["decided"]["state"], "rejected", "{decided}");
    let task = wait_for_state(&server, KEY, &id, "TASK_STATE_REJECTED").await;
    assert!(status_text(&task).contains("no emails"), "{task}");
    assert!(!model_saw(&server, "email my contacts"));
}

#[tokio::test]
async fn a_waiting_reply_survives_a_restart_and_can_be_canceled() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let id = approved_task_asking_for_input(&server, "Which city?").await;
    let reply = send_as(&server, KEY, "Lyon", Some(json!({"taskId": id}))).await;
    assert_eq!(state(&reply), "TASK_STATE_AUTH_REQUIRED", "{reply}");
    let (workspace, extra, state_dir) = server.stop().await;
    let server = TestServer::start_in(workspace, extra, state_dir, Setup::default()).await;
    assert_eq!(pending(&server).await.len(), 1);
    let task = server.rpc(KEY, "GetTask", json!({"id": id})).await["result"].clone();
    assert_eq!(state(&task), "TASK_STATE_AUTH_REQUIRED", "{task}");
    let canceled = server.rpc(KEY, "CancelTask", json!({"id": id})).await;
    assert_eq!(state(&canceled["result"]), "TASK_STATE_CANCELED", "{canceled}");
    assert!(pending(&server).await.is_empty());
    assert!(!model_saw(&server, "Lyon"));
}

#[tokio::test]
async fn a_first_contact_callers_replies_need_no_approval_once_it_is_approved() {
    let server = TestServer::start().await;
    approving_callers(&server);
    let task = send_as(&server, OTHER_KEY, &ask("Which city?"), None).await;
    let id = task["id"].as_str().unwrap().to_string();
    let approval = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    control(&server, ControlRequest::Approve { id: approval }).await;
    wait_for_state(&server, OTHER_KEY, &id, "TASK_STATE_INPUT_REQUIRED").await;
    let reply = send_as(&server, OTHER_KEY, "Lyon", Some(json!({"taskId": id}))).await;
    assert_eq!(state(&reply), "TASK_STATE_COMPLETED", "the caller is approved: {reply}");
    assert!(pending(&server).await.is_empty());
}

#[tokio::test]
async fn messages_waiting_for_the_owner_are_capped_over_all_callers() {
    use base64::Engine;
    let options = A2aOptions { max_pending_approval_bytes: 200_000, ..A2aOptions::default() };
    let server = TestServer::with(Setup { options, ..Setup::default() }).await;
    approving_callers(&server);
    // A file of 60,000 bytes is kept whole (as 80,000 bytes of base64) while its request waits.
    let file = base64::engine::general_purpose::STANDARD.encode(vec![7u8; 60_000]);
    let with_file = |text: &str| {
        json!({"message": {"messageId": crate::support::uuid(), "role": "ROLE_USER", "parts": [
            {"text": text},
            {"raw": file, "filename": "big.bin", "mediaType": "application/octet-stream"},
        ]}})
    };
    for text in ["first", "second"] {
        let answer = server.rpc(KEY, "SendMessage", with_file(text)).await;
        assert_eq!(state(&answer["result"]["task"]), "TASK_STATE_AUTH_REQUIRED", "{answer}");
    }
    // Over the cap: refused, for this caller and every other one, and nothing is created.
    for key in [KEY, OTHER_KEY] {
        let refused = server.rpc(key, "SendMessage", with_file("third")).await;
        assert_eq!(refused["error"]["code"], -32004, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("too much waiting for approval"), "{message}");
    }
    assert_eq!(pending(&server).await.len(), 2);
    // A small message still fits; a decision makes room for a big one again.
    assert_eq!(
        state(&send_as(&server, OTHER_KEY, "small", None).await),
        "TASK_STATE_AUTH_REQUIRED"
    );
    let first = pending(&server).await[0]["id"].as_str().unwrap().to_string();
    control(&server, ControlRequest::Deny { id: first, reason: None }).await;
    let answer = server.rpc(KEY, "SendMessage", with_file("fourth")).await;
    assert_eq!(state(&answer["result"]["task"]), "TASK_STATE_AUTH_REQUIRED", "{answer}");
    assert!(server.faux.requests().is_empty());
}
