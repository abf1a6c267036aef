//! The project's shell scripts on the paths that need no Docker: `deploy/cluster init`
//! refuses a model that is not there (which once mounted the host's `/`), a key that is
//! not one (which once wrote an empty endpoint id) and overwriting edited files without
//! `--force`; `.ci/fetch-models` alone fetches only the main model; `.ci/run` checks root,
//! the Docker daemon and Chromium before anything else, sets `CI` itself and runs exactly
//! README's test command. `.ci/run` and `.ci/fetch-models` run in a scratch copy of the
//! repository whose tools (`id`, `docker`, `cargo`, `python3`, …) are small scripts that
//! record how they were called.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::scratch;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs `deploy/cluster init ARGS` with this build's binary.
fn init(args: &[&OsStr]) -> Output {
    Command::new(root().join("deploy/cluster"))
        .arg("init")
        .args(args)
        .env("SWACTOR_BIN", assert_cmd::cargo::cargo_bin("swactor"))
        .output()
        .expect("deploy/cluster")
}

/// A fresh, empty state directory for one test.
fn state(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn cluster_init_refuses_a_model_that_is_not_there_or_not_gguf_and_writes_no_env() {
    let dir = state("cluster-no-model");
    let typo = scratch().join("no-such-dir").join("model.gguf");
    let out = init(&[typo.as_os_str(), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("no model file at"), "{}", text(&out.stderr));
    assert!(!dir.join("compose.env").exists(), "nothing that would mount / is written");

    let not_gguf = scratch().join("cluster-notes.txt");
    std::fs::write(&not_gguf, b"just text").expect("write");
    let out = init(&[not_gguf.as_os_str(), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("is not a GGUF file"), "{}", text(&out.stderr));
    assert!(!dir.join("compose.env").exists());
}

#[test]
fn cluster_init_refuses_a_corrupt_key_and_writes_no_empty_endpoint_id() {
    let dir = state("cluster-bad-key");
    std::fs::create_dir_all(&dir).expect("state");
    let key = dir.join("n2.key");
    std::fs::write(&key, b"not a key").expect("key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let model = crate::support::synth_model(2);
    let out = init(&[model.as_os_str(), dir.as_os_str()]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("n2.key: not a usable key"), "{}", text(&out.stderr));
    assert!(!dir.join("pool.toml").exists() && !dir.join("compose.env").exists());
    assert_eq!(std::fs::read(&key).expect("key"), b"not a key", "the key is left as it was");
}

#[test]
fn cluster_init_keeps_edited_files_unless_forced_and_a_rerun_that_changes_nothing_passes() {
    let dir = state("cluster-edited");
    let model = crate::support::synth_model(2);
    let args = [model.as_os_str(), dir.as_os_str(), "18080".as_ref(), "10.213.9".as_ref()];
    let out = init(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), dir.join("compose.env").to_str().expect("utf8"));
    let env = std::fs::read_to_string(dir.join("compose.env")).expect("env");
    let models = model.parent().expect("dir").canonicalize().expect("canonical");
    assert!(env.contains(&format!("SWACTOR_MODELS={}\n", models.display())), "{env}");
    let pool = std::fs::read_to_string(dir.join("pool.toml")).expect("pool");
    assert_eq!(pool.matches("endpoint_id = \"").count(), 3, "{pool}");
    assert!(!pool.contains("endpoint_id = \"\""), "{pool}");
    assert!(init(&args).status.success(), "the same init again writes the same files");

    let edited = format!("{pool}# mine\n");
    std::fs::write(dir.join("pool.toml"), &edited).expect("edit");
    let out = init(&args);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("--force"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("pool.toml")).expect("pool"), edited);

    let other_port = [model.as_os_str(), dir.as_os_str(), "18081".as_ref(), "10.213.9".as_ref()];
    std::fs::write(dir.join("pool.toml"), &pool).expect("restore");
    let out = init(&other_port);
    assert_eq!(out.status.code(), Some(3), "compose.env would change");
    assert_eq!(std::fs::read_to_string(dir.join("compose.env")).expect("env"), env);

    let mut forced = vec![OsStr::new("--force")];
    forced.extend(other_port);
    let out = init(&forced);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let env2 = std::fs::read_to_string(dir.join("compose.env")).expect("env");
    assert!(env2.contains("SWACTOR_HTTP_PORT=18081"), "{env2}");
    assert_eq!(std::fs::read_to_string(dir.join("pool.toml")).expect("pool"), pool);
}

/// Writes an executable script `name` into `dir`.
fn tool(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write tool");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// A scratch repository holding a copy of `.ci/<script>`, and a `bin` directory of tools.
fn sandbox(name: &str, script: &str) -> (PathBuf, PathBuf) {
    let repo = state(name);
    let bin = repo.join("bin");
    std::fs::create_dir_all(repo.join(".ci")).expect("mkdir");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::fs::copy(root().join(".ci").join(script), repo.join(".ci").join(script)).expect("copy");
    (repo, bin)
}

#[test]
fn fetch_models_alone_fetches_only_the_main_model_and_prints_its_path() {
    let (repo, bin) = sandbox("ci-fetch", "fetch-models");
    let models = repo.join(".cache/models");
    std::fs::create_dir_all(&models).expect("mkdir");
    let smollm2 = models.join("SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::write(&smollm2, b"GGUF").expect("model");
    let log = repo.join("python3.log");
    // Every fetch goes through python3: here it records the call and fails.
    tool(&bin, "python3", &format!("echo \"$*\" >> {}; exit 1", log.display()));
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let run = |args: &[&str]| {
        Command::new(repo.join(".ci/fetch-models"))
            .args(args)
            .env("PATH", &path)
            .output()
            .expect("fetch-models")
    };
    let out = run(&[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), smollm2.to_str().expect("utf8"));
    assert!(!log.exists(), "nothing but SmolLM2 is fetched: {:?}", std::fs::read_to_string(&log));

    let out = run(&["--tests"]);
    assert_eq!(out.status.code(), Some(1), "a failed test download fails `--tests`");
    let err = text(&out.stderr);
    assert!(err.contains("fetching what the tests use failed"), "{err}");
    assert!(log.exists(), "`--tests` fetches Gemma and the vocabularies");
    assert_eq!(run(&["--bogus"]).status.code(), Some(2));
}

/// README's test command: the first line of the `sh` block after "**The tests**".
fn readme_test_command() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README");
    let tests = &readme[readme.find("**The tests**").expect("a tests paragraph")..];
    let block = &tests[tests.find("```sh\n").expect("a command block") + 6..];
    block.lines().next().expect("a command").to_string()
}

/// A sandbox for `.ci/run`: every tool it calls records `CI` and its arguments in `log`.
/// `root` says what `id -u` answers; `docker_up` whether `docker info` succeeds;
/// `chromium` whether Chromium is installed (apt-get cannot install anything here).
fn ci_sandbox(name: &str, root_user: bool, docker_up: bool, chromium: bool) -> (PathBuf, PathBuf) {
    let (repo, bin) = sandbox(name, "run");
    let log = repo.join("calls.log");
    let record = |tool_name: &str| format!("echo \"CI=$CI {tool_name} $*\" >> {}", log.display());
    tool(&bin, "id", &format!("echo {}", if root_user { 0 } else { 1000 }));
    tool(&bin, "docker", &format!("{}; exit {}", record("docker"), u8::from(!docker_up)));
    tool(&bin, "docker-compose", &record("docker-compose"));
    if chromium {
        tool(&bin, "chromium", &record("chromium"));
    }
    tool(&bin, "apt-get", &format!("{}; exit 1", record("apt-get")));
    tool(&bin, "rustup", &record("rustup"));
    tool(&bin, "cargo", &record("cargo"));
    tool(&repo.join(".ci"), "fetch-models", &record(".ci/fetch-models"));
    tool(&repo.join(".ci"), "arm64", &record(".ci/arm64"));
    for real in ["bash", "dirname"] {
        let found =
            ["/usr/bin", "/bin"].iter().map(|d| Path::new(d).join(real)).find(|p| p.exists());
        std::os::unix::fs::symlink(found.expect("bash and dirname"), bin.join(real)).expect("link");
    }
    (repo, log)
}

fn ci_run(repo: &Path) -> (Output, String) {
    let out = Command::new(repo.join("bin/bash"))
        .arg(repo.join(".ci/run"))
        .env_clear()
        .env("PATH", repo.join("bin"))
        .output()
        .expect(".ci/run");
    let log = std::fs::read_to_string(repo.join("calls.log")).unwrap_or_default();
    (out, log)
}

#[test]
fn ci_run_checks_root_docker_and_chromium_up_front_and_fails_clearly_when_one_is_missing() {
    for (name, user, docker, chromium, says) in [
        ("ci-not-root", false, true, true, "run as root"),
        ("ci-no-docker", true, false, true, "the Docker daemon does not answer"),
        ("ci-no-chromium", true, true, false, "could not install chromium"),
    ] {
        let (repo, _) = ci_sandbox(name, user, docker, chromium);
        let (out, log) = ci_run(&repo);
        assert_eq!(out.status.code(), Some(1), "{name}: {log}");
        assert!(text(&out.stderr).contains(says), "{name}: {}", text(&out.stderr));
        assert!(!log.contains("cargo"), "{name}: nothing is built before the checks: {log}");
    }
}

#[test]
fn ci_run_sets_ci_itself_and_runs_exactly_readmes_test_command() {
    let command = readme_test_command();
    assert_eq!(command, ".ci/fetch-models --tests && cargo test");
    let script = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    assert_eq!(script.lines().rev().find(|l| !l.trim().is_empty()), Some(command.as_str()));

    let (repo, _) = ci_sandbox("ci-all-there", true, true, true);
    let (out, log) = ci_run(&repo);
    assert!(out.status.success(), "{}\n{log}", text(&out.stderr));
    let calls: Vec<&str> = log.lines().collect();
    let cargo: Vec<&str> = calls.iter().copied().filter(|l| l.contains(" cargo ")).collect();
    assert!(cargo.iter().all(|l| l.starts_with("CI=true ")), "CI is set for every build: {log}");
    let tail = &calls[calls.len() - 2..];
    assert_eq!(tail, ["CI=true .ci/fetch-models --tests", "CI=true cargo test"], "{log}");
    // The ARM64 tiers are checked under emulation (after the lints, before the tests).
    assert!(calls.contains(&"CI=true .ci/arm64 "), "{log}");
}
