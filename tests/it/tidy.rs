//! Architecture invariants, checked on the source tree (rust-analyzer's tidy tests are the
//! model): pure modules import no async runtime, network, OS or clock, and no module
//! imports a layer above its own. The layers are ARCHITECTURE.md's:
//!
//! 0 wire (ids, specs, header, plans, reasons, evidence, events, the worker and control
//!   wire formats) < 1 mechanisms (ring, arena memfd, model, net, clock, frame IO, device
//!   bridges, weights) < 2 state machines (sans-IO) < 3 drivers and roles < 4 CLI.
//!
//! Pure = layers 0 and 2. Each checker is a plain function so the tests below can plant a
//! violation and see it caught (the test of the test).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layer of a source file (relative to `src/`), or `None` for files that only declare
/// and re-export modules (`mod.rs`).
fn layer(rel: &str) -> Option<u8> {
    if rel.ends_with("mod.rs") && rel != "control/mod.rs" {
        return None;
    }
    // A `x/tests.rs` test module has the layer of `x.rs` (or of its folder).
    if let Some(parent) = rel.strip_suffix("/tests.rs")
        && let Some(l) = lookup(&format!("{parent}.rs"))
    {
        return Some(l);
    }
    lookup(rel)
}

fn lookup(rel: &str) -> Option<u8> {
    // Longest prefix wins.
    const TABLE: &[(&str, u8)] = &[
        ("wire/", 0),
        ("control/tests.rs", 0),
        ("events.rs", 0),
        ("worker/protocol.rs", 0),
        ("control/mod.rs", 0),
        ("ring/", 1),
        ("arena/memfd.rs", 1),
        ("model/", 1),
        ("engine/", 1),
        ("net/", 1),
        ("clock.rs", 1),
        ("control/io.rs", 1),
        ("worker/device.rs", 1),
        ("worker/cuda.rs", 1),
        ("worker/role.rs", 1),
        ("stage/weights.rs", 1),
        ("planner/", 2),
        ("arena/manager.rs", 2),
        ("edge/establisher.rs", 2),
        ("edge/plane.rs", 2),
        ("membership/pool_gate.rs", 2),
        ("membership/auth.rs", 2),
        ("node/boot.rs", 2),
        ("stage/controller.rs", 2),
        ("orchestrator/run.rs", 2),
        ("orchestrator/tokens.rs", 2),
        ("orchestrator/scheduler.rs", 2),
        ("orchestrator/requests.rs", 2),
        ("sim/", 2),
        ("workerctl/fsm.rs", 2),
        ("worker/ingress.rs", 2),
        ("worker/egress.rs", 2),
        ("worker/posted.rs", 2),
        ("worker/", 3),
        ("workerctl/", 3),
        ("edge/", 3),
        ("membership/", 3),
        ("node/", 3),
        ("orchestrator/", 3),
        ("stage/", 3),
        ("bench", 3),
        ("fuzz.rs", 3),
        ("cli/", 4),
        ("lib.rs", 4),
        ("main.rs", 4),
    ];
    TABLE.iter().filter(|(p, _)| rel.starts_with(p)).max_by_key(|(p, _)| p.len()).map(|&(_, l)| l)
}

const LAYER_NAMES: [&str; 5] = ["wire", "mechanisms", "state machines", "drivers", "cli"];

/// What a pure file may not mention.
const IMPURE: &[&str] = &[
    "tokio",
    "iroh",
    "rustix",
    "memmap2",
    "reqwest",
    "std::fs",
    "std::process",
    "std::env",
    "std::net::UdpSocket",
    "std::net::TcpStream",
    "std::thread::sleep",
    "Instant::now",
    "SystemTime::now",
    "UNIX_EPOCH",
    "clock_gettime",
    "elapsed()",
];

/// The source without comments and string literals, and without a trailing
/// `#[cfg(test)] mod tests { ... }` (tests own their clock).
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
                out.push_str("\"\"");
            }
            '\'' => {
                // A char literal ('x', '\n') or a lifetime ('a): keep lifetimes as they are.
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') || rest.chars().nth(1) == Some('\'') {
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                    }
                    out.push_str("' '");
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// Every `crate::...` path the code names, `use crate::{a::B, c::{D, E}}` expanded.
fn crate_paths(code: &str) -> Vec<String> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let tree = tree.trim();
        if let Some(open) = tree.find('{') {
            let head = tree[..open].trim().trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let base =
                if head.is_empty() { prefix.to_string() } else { format!("{prefix}::{head}") };
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&base, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand(&base, &inner[start..], out);
        } else if !tree.is_empty() {
            let item = tree.split(" as ").next().unwrap_or(tree).trim();
            if item == "self" {
                out.push(prefix.to_string());
            } else {
                out.push(format!("{prefix}::{item}"));
            }
        }
    }
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        if after.starts_with('{') {
            let end = after.find(';').unwrap_or(after.len());
            expand("crate", &after[..end], &mut out);
            rest = &after[end..];
            continue;
        }
        let end = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(after.len());
        let path = after[..end].trim_end_matches(':');
        if after[end..].starts_with('{') {
            let close = after.find(';').unwrap_or(after.len());
            expand(&format!("crate::{path}"), &after[end..close], &mut out);
            rest = &after[close..];
        } else {
            out.push(format!("crate::{path}"));
            rest = &after[end..];
        }
    }
    out
}

/// The source file (relative to `src/`) a `crate::a::b::C` path resolves to, following
/// `pub use sub::{...}` re-exports of a `mod.rs`.
fn resolve(path: &str, files: &BTreeMap<String, String>) -> Option<String> {
    let segs: Vec<&str> = path.trim_start_matches("crate::").split("::").collect();
    for n in (1..=segs.len()).rev() {
        let dir = segs[..n].join("/");
        for candidate in [format!("{dir}.rs"), format!("{dir}/mod.rs")] {
            if !files.contains_key(&candidate) {
                continue;
            }
            if candidate.ends_with("mod.rs") && n < segs.len() {
                let item = segs[n];
                let module = &candidate[..candidate.len() - "mod.rs".len()];
                let text = code_of(&files[&candidate]);
                for stmt in text.split(';') {
                    let Some(u) = stmt.trim().strip_prefix("pub use ") else { continue };
                    let Some((sub, items)) = u.split_once("::") else { continue };
                    let mentions = items
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|w| w == item);
                    if mentions {
                        for target in [format!("{module}{sub}.rs"), format!("{module}{sub}/mod.rs")]
                        {
                            if files.contains_key(&target) {
                                return Some(target);
                            }
                        }
                    }
                }
            }
            return Some(candidate);
        }
    }
    None
}

/// Every violation in `files` (path relative to `src/` -> text).
fn violations(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, text) in files {
        let Some(own) = layer(rel) else { continue };
        let code = code_of(text);
        if (own == 0 || own == 2) && !rel.ends_with("/tests.rs") {
            for word in IMPURE {
                if code.contains(word) {
                    found.push(format!("{rel}: a pure module mentions `{word}`"));
                }
            }
        }
        for path in crate_paths(&code) {
            let Some(target) = resolve(&path, files) else { continue };
            let Some(theirs) = layer(&target) else { continue };
            if theirs > own {
                found.push(format!(
                    "{rel} ({}) imports {path} from {target} ({})",
                    LAYER_NAMES[own as usize], LAYER_NAMES[theirs as usize]
                ));
            }
        }
    }
    found
}

fn sources(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).expect("src").flatten() {
        let path: PathBuf = entry.path();
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("rel").to_string_lossy().replace('\\', "/");
            out.insert(rel, std::fs::read_to_string(&path).expect("read"));
        }
    }
}

fn tree() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, &root, &mut files);
    files
}

#[test]
fn every_source_file_has_a_layer_or_only_declares_modules() {
    let unplaced: Vec<String> =
        tree().into_keys().filter(|rel| layer(rel).is_none() && !rel.ends_with("mod.rs")).collect();
    assert!(unplaced.is_empty(), "files without a layer: {unplaced:?}");
}

#[test]
fn pure_modules_stay_pure_and_no_layer_imports_a_higher_one() {
    let found = violations(&tree());
    assert!(found.is_empty(), "architecture violations:\n{}", found.join("\n"));
}

fn planted(files: &[(&str, &str)]) -> Vec<String> {
    let mut tree = tree();
    for (rel, text) in files {
        tree.insert(rel.to_string(), text.to_string());
    }
    violations(&tree)
}

#[test]
fn the_checker_catches_a_clock_or_runtime_planted_in_a_state_machine() {
    for (word, text) in [
        ("tokio", "use tokio::sync::mpsc;\n"),
        ("Instant::now", "fn f() { let _ = std::time::Instant::now(); }\n"),
        ("std::env", "fn f() { let _ = std::env::var(\"X\"); }\n"),
        ("rustix", "fn f() { rustix::time::clock_gettime(rustix::time::ClockId::Monotonic); }\n"),
    ] {
        let found = planted(&[("planner/planted.rs", text)]);
        assert!(
            found.iter().any(|v| v.starts_with("planner/planted.rs") && v.contains(word)),
            "{word} not caught: {found:?}"
        );
    }
    // Comments, strings and a trailing test module do not count.
    let clean = planted(&[(
        "planner/planted.rs",
        "// tokio\nconst A: &str = \"Instant::now\";\n#[cfg(test)]\nmod tests { use tokio; }\n",
    )]);
    assert!(!clean.iter().any(|v| v.starts_with("planner/planted.rs")), "{clean:?}");
}

#[test]
fn the_checker_catches_an_upward_import_through_a_re_export() {
    // The arena manager (a state machine) reaching up to the worker controller's driver
    // types, and the ring (a mechanism) reaching up to the arena manager, through the
    // `pub use` of `arena/mod.rs`.
    let found = planted(&[
        ("arena/manager.rs", "use crate::workerctl::WorkerDriver;\n"),
        ("ring/ends.rs", "use crate::{arena::ArenaManager, wire::RingId};\n"),
    ]);
    assert!(
        found.iter().any(|v| v.starts_with("arena/manager.rs") && v.contains("workerctl")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|v| v.starts_with("ring/ends.rs") && v.contains("arena/manager.rs")),
        "{found:?}"
    );
}

/// Where each piece of ring evidence may be minted (files relative to `src/`).
const MINTS: &[(&str, &[&str])] = &[
    // The simulation's world observes its simulated pumps.
    ("PumpStopped::observed", &["ring/ends.rs", "edge/establisher.rs", "sim/world.rs"]),
    ("WorkerQuiet::reported", &["workerctl/fsm.rs"]),
    ("WorkerQuiet::reaped", &["workerctl/fsm.rs"]),
    ("WorkerQuiet::endpoint_stopped", &["orchestrator/tokens.rs"]),
];

fn mint_violations(files: &BTreeMap<String, String>) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, text) in files {
        if rel.ends_with("tests.rs") || rel == "wire/evidence.rs" {
            continue;
        }
        let code = code_of(text);
        for (mint, allowed) in MINTS {
            if code.contains(mint) && !allowed.contains(&rel.as_str()) {
                found.push(format!("{rel} mints {mint}"));
            }
        }
    }
    found
}

#[test]
fn ring_evidence_is_minted_only_where_it_is_observed() {
    let found = mint_violations(&tree());
    assert!(found.is_empty(), "{found:?}");
    // A driver that synthesizes the worker's evidence is caught.
    let mut planted = tree();
    planted.insert(
        "node/host.rs".into(),
        "fn f() { let _ = WorkerQuiet::reported(RingId(1), false); }".into(),
    );
    assert_eq!(mint_violations(&planted), vec!["node/host.rs mints WorkerQuiet::reported"]);
}

/// Functions of more than `max_fn` lines and files of more than `max_file` lines among
/// the drivers (layer 3): the sign of a state machine missing (STYLE.md).
fn oversized(files: &BTreeMap<String, String>, max_fn: usize, max_file: usize) -> Vec<String> {
    let mut found = Vec::new();
    for (rel, text) in files {
        // A `mod.rs` with code is sized as a file of its folder's layer.
        let folder = || rel.strip_suffix("mod.rs").and_then(lookup);
        if layer(rel).or_else(folder) != Some(3) || rel.ends_with("tests.rs") {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > max_file {
            found.push(format!("{rel}: {} lines", lines.len()));
        }
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let is_fn = ["fn ", "pub fn ", "async fn ", "pub async fn ", "pub(super) fn "]
                .iter()
                .chain(&["pub(super) async fn ", "pub(crate) fn ", "pub(crate) async fn "])
                .any(|p| trimmed.starts_with(p));
            if !is_fn || trimmed.ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            if let Some(len) = lines[i + 1..].iter().position(|l| *l == close)
                && len + 2 > max_fn
            {
                found.push(format!("{rel}:{}: a function of {} lines", i + 1, len + 2));
            }
        }
    }
    found
}

#[test]
fn no_driver_function_is_over_120_lines_and_no_driver_file_over_600() {
    let found = oversized(&tree(), 120, 600);
    assert!(found.is_empty(), "{found:?}");
    let mut planted = tree();
    let long = format!("fn long() {{\n{}}}\n", "    let _ = 1;\n".repeat(130));
    planted.insert("node/planted.rs".into(), long);
    assert_eq!(oversized(&planted, 120, 600), vec!["node/planted.rs:1: a function of 132 lines"]);
    let mut planted = tree();
    planted.insert("worker/planted/mod.rs".into(), "// a line\n".repeat(601));
    assert_eq!(oversized(&planted, 120, 600), vec!["worker/planted/mod.rs: 601 lines"]);
}
