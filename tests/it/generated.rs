//! The committed completions, man pages and CLI reference match the CLI definitions.
//! Regenerate with:
//! `swactor util completions --dir completions && swactor util man --dir man &&
//!  swactor util markdown-help > man/swactor.md`

use std::path::Path;

use swactor::cli::util_cmd::{SHELLS, completion, completion_file_name, man_pages, markdown_help};

fn committed(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; regenerate it (see tests/it/generated.rs)", path.display())
    })
}

#[test]
fn committed_shell_completions_are_up_to_date() {
    for shell in SHELLS {
        let name = completion_file_name(shell);
        let fresh = String::from_utf8(completion(shell)).expect("utf8");
        for hidden in ["markdown-help", "ring-produce", "SWACTOR_ARENA_FD"] {
            assert!(!fresh.contains(hidden), "hidden commands are not completed ({hidden})");
        }
        assert!(
            committed(&format!("completions/{name}")) == fresh,
            "completions/{name} is stale; regenerate it"
        );
    }
}

#[test]
fn committed_man_pages_are_up_to_date() {
    let pages = man_pages();
    assert!(pages.iter().any(|(n, _)| n == "man1/swactor-run-plan.1"));
    assert!(pages.iter().any(|(n, _)| n == "man5/swactor-pool.5"), "the pool file has its page");
    assert!(!pages.iter().any(|(n, _)| n.contains("util")), "hidden commands get no page");
    for (name, page) in pages {
        let fresh = String::from_utf8(page).expect("utf8");
        assert!(committed(&format!("man/{name}")) == fresh, "man/{name} is stale; regenerate it");
    }
}

#[test]
fn every_page_a_man_page_refers_to_exists() {
    let pages = man_pages();
    let names: Vec<String> = pages
        .iter()
        .filter_map(|(n, _)| n.rsplit('/').next())
        .map(|n| n.replace('.', "("))
        .collect();
    for (name, page) in &pages {
        let text = String::from_utf8_lossy(page).replace("\\-", "-");
        for word in text.split(|c: char| c.is_whitespace() || c == ',') {
            if word.starts_with("swactor") && (word.ends_with("(1)") || word.ends_with("(5)")) {
                let wanted = word.trim_end_matches(')');
                assert!(
                    names.iter().any(|n| n == wanted),
                    "{name} refers to {word}, which has no page"
                );
            }
        }
    }
}

#[test]
fn the_committed_cli_reference_is_up_to_date_and_hides_hidden_roles() {
    let fresh = markdown_help();
    assert!(!fresh.contains("swactor util"), "hidden commands stay out of the reference");
    assert!(fresh.contains("## `swactor run plan`"));
    assert!(
        committed("man/swactor.md").trim_end() == fresh.trim_end(),
        "man/swactor.md is stale; regenerate it"
    );
}
