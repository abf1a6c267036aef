//! What the compiler cannot hold, checked on the source tree (rust-analyzer's tidy tests are
//! the model). The compiler already keeps the core crate free of any async runtime,
//! network, OS or clock crate (its `Cargo.toml`, checked here too); these tests add:
//!
//! - the core reads no clock, environment, file, process or socket of `std`;
//! - no module imports a layer above its own, `super::` paths and `mod.rs` files included
//!   (ARCHITECTURE.md's layers: 0 data and pure mechanisms of the core < 1 the main
//!   crate's mechanisms < 2 the core's state machines < 3 the drivers of components
//!   (worker, edges, membership, stage) and the core's simulation < 4 roles (node,
//!   orchestrator, benchmarks) < 5 the CLI);
//! - no circle of imports, between files of different folders or inside one folder
//!   (with a named allowlist);
//! - ring evidence is minted only where it is observed;
//! - no function over 120 lines and no file over 700 outside tests, in every crate,
//!   with a named allowlist.
//!
//! Each checker is a plain function over a map of files, so the tests below plant a
//! violation and see it caught (the test of the test).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Files by key: `core/…`, `main/…` or `engine/…` (relative to that crate's `src/`).
type Files = BTreeMap<String, String>;

/// The layer of a file, or `None` for a crate root that only declares modules.
fn layer(key: &str) -> Option<u8> {
    let (krate, rel) = key.split_once('/')?;
    // A test module has the layer of what it tests (`x/tests.rs` tests `x.rs` or `x/`).
    if let Some(parent) = rel.strip_suffix("/tests.rs") {
        return layer(&format!("{krate}/{parent}.rs"))
            .or_else(|| layer(&format!("{krate}/{parent}/mod.rs")));
    }
    let table: &[(&str, u8)] = match krate {
        "core" => &[
            ("wire/", 0),
            ("events.rs", 0),
            ("control/", 0),
            ("ring/", 0),
            ("model/", 0),
            ("speculate/", 0),
            ("chat/", 0),
            ("worker/protocol.rs", 0),
            ("worker/device.rs", 0),
            ("worker/", 2),
            ("arena/", 2),
            ("edge/", 2),
            ("membership/", 2),
            ("node/", 2),
            ("stage/", 2),
            ("orchestrator/", 2),
            ("workerctl/", 2),
            ("planner/", 2),
            ("serve/", 2),
            ("wan/", 2),
            ("sim/", 3),
        ],
        "main" => &[
            ("ring/", 1),
            ("arena/memfd.rs", 1),
            ("model/", 1),
            ("net/", 1),
            ("clock.rs", 1),
            ("control/", 1),
            ("worker/cuda.rs", 1),
            ("worker/role.rs", 1),
            ("stage/weights.rs", 1),
            ("arena/", 3),
            ("worker/", 3),
            ("workerctl/", 3),
            ("edge/", 3),
            ("membership/", 3),
            ("stage/", 3),
            ("wan/", 3),
            ("node/", 4),
            ("orchestrator/", 4),
            ("server/", 4),
            ("bench/", 4),
            ("fuzz.rs", 4),
            ("cli/", 5),
            ("main.rs", 5),
        ],
        "engine" => &[("", 1)],
        _ => &[],
    };
    // A folder's `mod.rs` has the folder's layer.
    let probe = rel.strip_suffix("mod.rs").unwrap_or(rel);
    table.iter().filter(|(p, _)| probe.starts_with(p)).max_by_key(|(p, _)| p.len()).map(|&(_, l)| l)
}

const LAYER_NAMES: [&str; 6] = [
    "core data",
    "mechanisms",
    "state machines",
    "component drivers and the simulation",
    "roles",
    "cli",
];

/// What the core may not reach for: `std` paths that read a clock, the environment, a file,
/// a process or a socket.
const IMPURE_STD: &[&str] = &[
    "std::env",
    "std::fs",
    "std::process",
    "std::net::UdpSocket",
    "std::net::TcpStream",
    "std::net::TcpListener",
    "std::thread::sleep",
    "std::time::SystemTime",
    "std::os",
    "std::io::stdin",
    "std::io::stdout",
];

/// Calls the core may not make, however the type was imported.
const IMPURE_CALLS: &[&str] = &["Instant::now", "SystemTime::now", "UNIX_EPOCH", ".elapsed()"];

/// Crates the core's manifest may not name.
const IMPURE_CRATES: &[&str] = &[
    "tokio",
    "iroh",
    "rustix",
    "memmap2",
    "candle-core",
    "candle-nn",
    "cudarc",
    "libc",
    "reqwest",
    "getrandom",
    "foca",
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
                    if c == '\n' {
                        out.push('\n');
                    }
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

/// Expands a use tree (`a::{b, c::{D, E}}`) under `prefix` into full paths.
fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = match (prefix.is_empty(), head.is_empty()) {
            (_, true) => prefix.to_string(),
            (true, false) => head.to_string(),
            (false, false) => format!("{prefix}::{head}"),
        };
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
        match (item, prefix.is_empty()) {
            ("self", _) => out.push(prefix.to_string()),
            (_, true) => out.push(item.to_string()),
            (_, false) => out.push(format!("{prefix}::{item}")),
        }
    }
}

/// Every path starting with one of `roots` that the code names, use trees expanded
/// (`use crate::{a::B, c::{D, E}}`, `super::x`, `std::{env, fs}`).
fn paths(code: &str, roots: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    // Use statements first: their trees are expanded whole.
    for stmt in code.split(';') {
        let s = stmt.trim_start();
        let s = s.strip_prefix("pub ").unwrap_or(s);
        let s = s.strip_prefix("pub(crate) ").unwrap_or(s);
        let s = s.strip_prefix("pub(super) ").unwrap_or(s);
        let Some(tree) = s.strip_prefix("use ") else { continue };
        let mut found = Vec::new();
        expand("", tree, &mut found);
        out.extend(found.into_iter().filter(|p| roots.iter().any(|r| p.starts_with(r))));
    }
    // Then inline paths (`crate::wire::RingId(1)`).
    for root in roots {
        let mut rest = code;
        while let Some(i) = rest.find(root) {
            let before = rest[..i].chars().last();
            let after = &rest[i..];
            let end = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(after.len());
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                out.push(after[..end].trim_end_matches(':').to_string());
            }
            rest = &after[end.max(1)..];
        }
    }
    out
}

/// The module path of a file (`node/host/mod.rs` -> `node::host`).
fn module_of(key: &str) -> Vec<String> {
    let rel = key.split_once('/').map_or(key, |(_, r)| r);
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let rel = rel.strip_suffix("/mod").unwrap_or(rel);
    if rel == "lib" || rel == "main" {
        return Vec::new();
    }
    rel.split('/').map(String::from).collect()
}

/// A path as the crate-relative segments it names, `super::` and `self::` resolved.
fn absolute(key: &str, path: &str) -> Option<(String, Vec<String>)> {
    let krate = key.split_once('/')?.0.to_string();
    let mut segs: Vec<&str> = path.split("::").collect();
    let first = *segs.first()?;
    let (krate, mut base) = match first {
        "crate" => (krate, Vec::new()),
        "swactor_core" => ("core".to_string(), Vec::new()),
        "swactor_engine" => ("engine".to_string(), Vec::new()),
        "super" | "self" => {
            let mut m = module_of(key);
            while segs.first() == Some(&"super") {
                m.pop()?;
                segs.remove(0);
            }
            if segs.first() == Some(&"self") {
                segs.remove(0);
            }
            return Some((
                krate,
                m.into_iter().chain(segs.iter().map(|s| s.to_string())).collect(),
            ));
        }
        _ => return None,
    };
    base.extend(segs[1..].iter().map(|s| s.to_string()));
    Some((krate, base))
}

/// The file a crate's segments resolve to, and how many segments matched, following
/// `pub use sub::{...}` re-exports of a `mod.rs`.
fn resolve_in(krate: &str, segs: &[String], files: &Files) -> Option<(String, usize)> {
    for n in (1..=segs.len()).rev() {
        let dir = segs[..n].join("/");
        for candidate in [format!("{krate}/{dir}.rs"), format!("{krate}/{dir}/mod.rs")] {
            let Some(text) = files.get(&candidate) else { continue };
            if candidate.ends_with("mod.rs") && n < segs.len() {
                let item = &segs[n];
                let module = &candidate[..candidate.len() - "mod.rs".len()];
                for stmt in code_of(text).split(';') {
                    let Some(u) = stmt.trim().strip_prefix("pub use ") else { continue };
                    let Some((sub, items)) = u.split_once("::") else { continue };
                    let mentions = items
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|w| w == item);
                    if mentions {
                        for target in [format!("{module}{sub}.rs"), format!("{module}{sub}/mod.rs")]
                        {
                            if files.contains_key(&target) {
                                return Some((target, n + 1));
                            }
                        }
                    }
                }
            }
            return Some((candidate, n));
        }
    }
    None
}

/// The file `path`, named in file `key`, resolves to. The main crate re-exports the
/// core's modules at the same paths: the deeper match of the two wins.
fn resolve(key: &str, path: &str, files: &Files) -> Option<String> {
    let (krate, segs) = absolute(key, path)?;
    let own = resolve_in(&krate, &segs, files);
    if krate != "main" {
        return own.map(|(f, _)| f);
    }
    let core = resolve_in("core", &segs, files);
    match (own, core) {
        (Some(o), Some(c)) if c.1 > o.1 => Some(c.0),
        (Some(o), _) => Some(o.0),
        (None, c) => c.map(|(f, _)| f),
    }
}

/// Every import of `files` as (importer, imported file, path), tests left out.
fn imports(files: &Files) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for (key, text) in files {
        if key.ends_with("tests.rs") || key.starts_with("engine/") {
            continue;
        }
        let code = code_of(text);
        for path in paths(&code, &["crate::", "super::", "self::", "swactor_core::"]) {
            if let Some(target) = resolve(key, &path, files)
                && &target != key
            {
                out.push((key.clone(), target, path));
            }
        }
    }
    out
}

/// Imports that run up a layer, and `std` or clock uses in the core.
fn violations(files: &Files) -> Vec<String> {
    let mut found = Vec::new();
    for (key, text) in files {
        if key.starts_with("core/") && !key.ends_with("tests.rs") {
            let code = code_of(text);
            let used = paths(&code, &["std::"]);
            for word in IMPURE_STD {
                if used.iter().any(|p| p.starts_with(word)) {
                    found.push(format!("{key}: the core uses `{word}`"));
                }
            }
            for call in IMPURE_CALLS {
                if code.contains(call) {
                    found.push(format!("{key}: the core calls `{call}`"));
                }
            }
        }
    }
    for (key, target, path) in imports(files) {
        let (Some(own), Some(theirs)) = (layer(&key), layer(&target)) else { continue };
        if theirs > own {
            found.push(format!(
                "{key} ({}) imports {path} from {target} ({})",
                LAYER_NAMES[own as usize], LAYER_NAMES[theirs as usize]
            ));
        }
    }
    found
}

/// Circles of imports inside one folder that are known and kept, each with its reason:
/// a circle's files, sorted as [`circles`] names them.
const CIRCLE_ALLOWLIST: &[(&[&str], &str)] = &[];

/// Circles of imports (Tarjan's components): across folders always, inside one folder
/// unless [`CIRCLE_ALLOWLIST`] names it; and allowlist entries no longer a circle.
fn circles(files: &Files) -> Vec<String> {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to, _) in imports(files) {
        edges.entry(from).or_default().insert(to);
    }
    let folder = |k: &str| k.rsplit_once('/').map_or(String::new(), |(d, _)| d.to_string());
    let mut found = Vec::new();
    let components = components(&edges);
    for (files, _) in CIRCLE_ALLOWLIST {
        if !components.iter().any(|c| c.as_slice() == *files) {
            found.push(format!("an allowlisted circle is gone (drop its entry): {files:?}"));
        }
    }
    for component in components {
        let folders: BTreeSet<String> = component.iter().map(|k| folder(k)).collect();
        if folders.len() > 1 {
            found.push(format!("a circle across folders: {component:?}"));
        } else if !CIRCLE_ALLOWLIST.iter().any(|(files, _)| *files == component.as_slice()) {
            let dir = folders.first().map_or("", String::as_str);
            found.push(format!("a circle inside {dir}/: {component:?}"));
        }
    }
    found
}

/// Strongly connected components of more than one file.
fn components(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Where each piece of ring evidence may be minted (core files); the main crate cannot
/// mint any (the constructors are private to the core: a type rule).
const MINTS: &[(&str, &[&str])] = &[
    // The simulation's world observes its simulated pumps.
    (
        "PumpStopped::observed",
        &[
            "core/ring/ends.rs",
            "core/edge/establisher.rs",
            "core/sim/world/node.rs",
            "core/sim/world/faults.rs",
        ],
    ),
    ("WorkerQuiet::reported", &["core/workerctl/fsm.rs"]),
    ("WorkerQuiet::reaped", &["core/workerctl/fsm.rs"]),
    ("WorkerQuiet::endpoint_stopped", &["core/orchestrator/tokens.rs"]),
];

fn mint_violations(files: &Files) -> Vec<String> {
    let mut found = Vec::new();
    for (key, text) in files {
        if key.ends_with("tests.rs") || key == "core/wire/evidence.rs" {
            continue;
        }
        let code = code_of(text);
        for (mint, allowed) in MINTS {
            if code.contains(mint) && !allowed.contains(&key.as_str()) {
                found.push(format!("{key} mints {mint}"));
            }
        }
        // A renamed evidence type would slip past the names above.
        for ty in ["PumpStopped as ", "WorkerQuiet as "] {
            if code.contains(ty) {
                found.push(format!("{key} renames {}", ty.trim_end_matches(" as ")));
            }
        }
    }
    found
}

/// Files and functions allowed over the size limits, each with its reason.
const SIZE_ALLOWLIST: &[(&str, &str)] = &[];

/// Functions of more than `max_fn` lines and files of more than `max_file` lines outside
/// tests (the sign of a state machine or a module missing: STYLE.md).
fn oversized(files: &Files, max_fn: usize, max_file: usize) -> Vec<String> {
    let mut found = Vec::new();
    for (key, text) in files {
        if key.ends_with("tests.rs") || key.contains("/tests/") {
            continue;
        }
        let text = match text.find("#[cfg(test)]\nmod tests {") {
            Some(i) => &text[..i],
            None => text.as_str(),
        };
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() > max_file {
            found.push(format!("{key}: {} lines", lines.len()));
        }
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let head = trimmed
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub(super) ")
                .trim_start_matches("pub ")
                .trim_start_matches("const ")
                .trim_start_matches("async ")
                .trim_start_matches("unsafe ");
            if !head.starts_with("fn ") || trimmed.ends_with(';') {
                continue;
            }
            let close = format!("{indent}}}");
            if let Some(len) = lines[i + 1..].iter().position(|l| *l == close)
                && len + 2 > max_fn
            {
                let name = head["fn ".len()..].split(['(', '<']).next().unwrap_or("?");
                found.push(format!("{key}:{}: fn {name} has {} lines", i + 1, len + 2));
            }
        }
    }
    found.retain(|f| !SIZE_ALLOWLIST.iter().any(|(k, _)| f.starts_with(k)));
    found
}

fn sources(dir: &Path, root: &Path, prefix: &str, out: &mut Files) {
    for entry in std::fs::read_dir(dir).expect("src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, root, prefix, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("rel").to_string_lossy().replace('\\', "/");
            out.insert(format!("{prefix}/{rel}"), std::fs::read_to_string(&path).expect("read"));
        }
    }
}

fn tree() -> Files {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Files::new();
    for (prefix, dir) in
        [("main", "src"), ("core", "crates/core/src"), ("engine", "crates/engine/src")]
    {
        let dir = root.join(dir);
        sources(&dir, &dir, prefix, &mut files);
    }
    files
}

fn planted(files: &[(&str, &str)]) -> Files {
    let mut tree = tree();
    for (key, text) in files {
        tree.insert(key.to_string(), text.to_string());
    }
    tree
}

/// The `[dependencies]` of a manifest.
fn dependencies(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("\n[dependencies]") else { return Vec::new() };
    let body = &manifest[start + "\n[dependencies]".len()..];
    let body = body.split("\n[").next().unwrap_or(body);
    body.lines()
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.trim().to_string()))
        .filter(|n| !n.is_empty() && !n.starts_with('#'))
        .collect()
}

fn impure_crates(manifest: &str) -> Vec<String> {
    dependencies(manifest).into_iter().filter(|d| IMPURE_CRATES.contains(&d.as_str())).collect()
}

#[test]
fn every_source_file_has_a_layer_or_only_declares_modules() {
    let unplaced: Vec<String> =
        tree().into_keys().filter(|k| layer(k).is_none() && !k.ends_with("/lib.rs")).collect();
    assert!(unplaced.is_empty(), "files without a layer: {unplaced:?}");
}

#[test]
fn the_core_manifest_names_no_runtime_network_os_or_clock_crate() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/core/Cargo.toml");
    let manifest = std::fs::read_to_string(manifest).expect("core manifest");
    assert!(dependencies(&manifest).contains(&"serde".to_string()), "the parser reads it");
    assert_eq!(impure_crates(&manifest), Vec::<String>::new());
    let planted = manifest.replace("[dependencies]\n", "[dependencies]\ntokio = \"1\"\n");
    assert_eq!(impure_crates(&planted), vec!["tokio"]);
}

#[test]
fn the_core_reads_no_clock_or_environment_and_no_layer_imports_a_higher_one() {
    let found = violations(&tree());
    assert!(found.is_empty(), "architecture violations:\n{}", found.join("\n"));
}

#[test]
fn the_checker_catches_grouped_std_imports_and_clock_calls_in_the_core() {
    for (word, text) in [
        ("std::env", "use std::{env, fs};\nfn f() { let _ = env::var(\"X\"); }\n"),
        ("std::fs", "use std::{collections::BTreeMap, fs::File};\n"),
        ("Instant::now", "fn f() { let _ = std::time::Instant::now(); }\n"),
        ("std::process", "fn f() { std::process::exit(1) }\n"),
    ] {
        let found = violations(&planted(&[("core/planner/planted.rs", text)]));
        assert!(
            found.iter().any(|v| v.starts_with("core/planner/planted.rs") && v.contains(word)),
            "{word} not caught: {found:?}"
        );
    }
    // Comments, strings and a trailing test module do not count.
    let clean = violations(&planted(&[(
        "core/planner/planted.rs",
        "// std::env\nconst A: &str = \"Instant::now\";\n#[cfg(test)]\nmod tests { use std::fs; }\n",
    )]));
    assert!(!clean.iter().any(|v| v.starts_with("core/planner/planted.rs")), "{clean:?}");
}

#[test]
fn the_checker_catches_upward_imports_through_super_mod_rs_and_re_exports() {
    let found = violations(&planted(&[
        // A state machine's mod.rs reaching up to the simulation.
        ("core/planner/mod.rs", "use crate::sim::simulate;\n"),
        // Core data reaching up to a state machine through `super::`.
        ("core/wire/planted.rs", "use super::super::stage::controller::StageController;\n"),
        // A mechanism reaching up to a driver through a `pub use` of a `mod.rs`.
        ("main/net/planted.rs", "use crate::{workerctl::WorkerDriver, wire::RingId};\n"),
    ]));
    for (file, target) in [
        ("core/planner/mod.rs", "core/sim"),
        ("core/wire/planted.rs", "core/stage/controller.rs"),
        ("main/net/planted.rs", "main/workerctl/driver.rs"),
    ] {
        assert!(
            found.iter().any(|v| v.starts_with(file) && v.contains(target)),
            "{file} -> {target} not caught: {found:?}"
        );
    }
}

#[test]
fn no_circle_of_imports_spans_two_folders_or_closes_inside_one() {
    let found = circles(&tree());
    assert!(found.is_empty(), "{found:?}");
    let planted = planted(&[
        ("core/edge/planted.rs", "use crate::stage::planted::B;\npub struct A;\n"),
        ("core/stage/planted.rs", "use crate::edge::planted::A;\npub struct B;\n"),
    ]);
    let found = circles(&planted);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains("core/edge/planted.rs") && found[0].contains("core/stage/planted.rs")
    );
}

#[test]
fn a_circle_inside_one_folder_is_caught() {
    let planted = planted(&[
        ("core/edge/planted_a.rs", "use super::planted_b::B;\npub struct A;\n"),
        ("core/edge/planted_b.rs", "use crate::edge::planted_a::A;\npub struct B;\n"),
    ]);
    let found = circles(&planted);
    assert_eq!(
        found,
        vec![
            "a circle inside core/edge/: [\"core/edge/planted_a.rs\", \"core/edge/planted_b.rs\"]"
        ]
    );
}

#[test]
fn ring_evidence_is_minted_only_where_it_is_observed() {
    let found = mint_violations(&tree());
    assert!(found.is_empty(), "{found:?}");
    // A state machine that synthesizes the worker's evidence is caught, renamed or not.
    let planted = planted(&[
        ("core/node/planted.rs", "fn f() { let _ = WorkerQuiet::reported(RingId(1), false); }"),
        ("core/edge/planted.rs", "use crate::wire::evidence::PumpStopped as P;"),
    ]);
    assert_eq!(
        mint_violations(&planted),
        vec![
            "core/edge/planted.rs renames PumpStopped",
            "core/node/planted.rs mints WorkerQuiet::reported"
        ]
    );
}

#[test]
fn no_function_is_over_120_lines_and_no_file_over_700_in_any_crate() {
    let found = oversized(&tree(), 120, 700);
    assert!(found.is_empty(), "{}", found.join("\n"));
    let long =
        format!("    pub(crate) fn long() {{\n{}    }}\n", "        let _ = 1;\n".repeat(130));
    let found = oversized(&planted(&[("core/planner/planted.rs", &long)]), 120, 700);
    assert_eq!(found, vec!["core/planner/planted.rs:1: fn long has 132 lines"]);
    let found =
        oversized(&planted(&[("engine/planted/mod.rs", &"// a line\n".repeat(701))]), 120, 700);
    assert_eq!(found, vec!["engine/planted/mod.rs: 701 lines"]);
}

/// Every `.rs` path under `dir` (relative to the repository), recursively.
fn rust_paths(root: &Path, dir: &str, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(root.join(dir)) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let rel = format!("{dir}/{name}");
        if entry.path().is_dir() {
            rust_paths(root, &rel, out);
        } else if name.ends_with(".rs") {
            out.insert(rel);
        }
    }
}

/// The `.rs` paths `doc` names that no file has: a path from the repository's root
/// (`src/`, `crates/`, `tests/`, `examples/`) must be that file; a shorter one (`driver/
/// reform.rs`, as a section names its files) must be the end of one.
fn missing_doc_paths(doc: &str, files: &BTreeSet<String>) -> Vec<String> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./-{}".contains(c);
    let mut missing = Vec::new();
    for word in doc.split(|c: char| !is_path(c)) {
        let word = word.trim_start_matches("./").trim_end_matches('.');
        // `x.rs` alone or `{a,b}.rs` patterns are prose, not one file.
        if !word.ends_with(".rs") || word.contains('{') || word == ".rs" {
            continue;
        }
        let rooted = ["src/", "crates/", "tests/", "examples/"].iter().any(|r| word.starts_with(r));
        let found = files.contains(word)
            || (!rooted && files.iter().any(|f| f.ends_with(&format!("/{word}"))));
        if !found {
            missing.push(word.to_string());
        }
    }
    missing
}

#[test]
fn every_rust_path_the_architecture_and_the_specs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = BTreeSet::new();
    for dir in ["src", "crates", "tests", "examples"] {
        rust_paths(root, dir, &mut files);
    }
    let mut docs = vec![root.join("ARCHITECTURE.md")];
    let specs = std::fs::read_dir(root.join("specs")).expect("specs/").flatten();
    docs.extend(specs.map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "md")));
    let mut found = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(doc).expect("doc");
        let name = doc.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        found.extend(missing_doc_paths(&text, &files).into_iter().map(|p| format!("{name}: {p}")));
    }
    assert!(found.is_empty(), "paths the docs name that do not exist:\n{}", found.join("\n"));
    // The checker itself: a moved file and a short name that ends no path are caught.
    let planted = "`src/orchestrator/run.rs` moved; `driver/nowhere.rs`; `run_loop.rs` is fine";
    assert_eq!(
        missing_doc_paths(planted, &files),
        vec!["src/orchestrator/run.rs", "driver/nowhere.rs"]
    );
}
