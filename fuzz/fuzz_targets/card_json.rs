//! card.json: whatever the owner wrote, the extended card is complete and serves in both shapes.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use tempfile::TempDir;
use volcanic_a2a::A2aOptions;
use volcanic_a2a::auth::A2aWorkspace;
use volcanic_a2a::binding::blended_card;
use volcanic_a2a::card::{card_path, extended_card};

static WORKSPACE: LazyLock<(TempDir, A2aWorkspace)> = LazyLock::new(|| {
    let dir = tempfile::tempdir().expect("a temp dir");
    let workspace = A2aWorkspace {
        path: dir.path().to_path_buf(),
        scope_prefix: "fuzz".into(),
        owner_id: "owner".into(),
    };
    let card = card_path(&workspace.path);
    std::fs::create_dir_all(card.parent().expect("card.json has a folder")).expect("a folder");
    (dir, workspace)
});

fuzz_target!(|data: &[u8]| {
    let (_, workspace) = &*WORKSPACE;
    std::fs::write(card_path(&workspace.path), data).expect("card.json is writable");
    let card = extended_card(&A2aOptions::default(), workspace, "https://bot.example.com");
    assert!(!card.name.trim().is_empty(), "empty card name");
    assert!(!card.description.trim().is_empty(), "empty card description");
    assert!(!card.skills.is_empty(), "a card without skills");
    let served = blended_card(&card);
    let read_back: a2a::AgentCard =
        serde_json::from_value(served).expect("the served card parses as a 1.0 card");
    assert_eq!(read_back.name, card.name);
    assert_eq!(read_back.skills.len(), card.skills.len());
});
