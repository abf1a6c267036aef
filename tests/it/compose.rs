//! README's cluster from one file: the image built from this binary (`deploy/cluster
//! image`), keys and pool file (`deploy/cluster init`), three nodes and a server from
//! `deploy/compose.yaml` under docker-compose. A chat streams; a node container is killed
//! in the middle of a long stream, which resumes on the nodes left and ends without an
//! error; the node starts again with its key and a later request succeeds;
//! `down -v` leaves no container, network or volume behind. Needs Docker and
//! docker-compose (Debian's packages); without them the test says so and returns, except
//! under `CI`, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::cli::smollm2;
use crate::serve::{get, metric, metrics_of, post_raw};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn available() -> bool {
    let ok = |c: &str, a: &str| Command::new(c).arg(a).output().is_ok_and(|o| o.status.success());
    let found = ok("docker", "info") && ok("docker-compose", "version");
    if !found {
        assert!(std::env::var_os("CI").is_none(), "CI must have docker and docker-compose");
        eprintln!("note: docker or docker-compose is missing; the compose test is skipped");
    }
    found
}

/// One compose project, brought down (with its volumes and image) when dropped.
struct Cluster {
    project: String,
    env: PathBuf,
    image: String,
}

impl Cluster {
    fn compose(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker-compose")
            .args(["-p", &self.project, "--env-file"])
            .arg(&self.env)
            .arg("-f")
            .arg(root().join("deploy/compose.yaml"))
            .args(args)
            .env("SWACTOR_IMAGE", &self.image)
            .output()
            .expect("docker-compose")
    }

    fn up(&self) {
        let out = self.compose(&["up", "-d"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    fn logs(&self) -> String {
        String::from_utf8_lossy(&self.compose(&["logs", "--tail", "40"]).stdout).into_owned()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v", "--remove-orphans", "-t", "5"]);
        let _ = Command::new("docker").args(["rmi", "-f", &self.image]).output();
    }
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker");
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

fn wait_health(url: &str, status: u16, timeout: Duration, cluster: &Cluster) {
    let deadline = Instant::now() + timeout;
    loop {
        if get(&format!("{url}/health")).is_ok_and(|(s, _)| s == status) {
            return;
        }
        assert!(Instant::now() < deadline, "health never {status}; logs:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn run(script: &Path, args: &[&std::ffi::OsStr], image: &str) -> String {
    let out =
        Command::new(script).args(args).env("SWACTOR_IMAGE", image).output().expect("cluster");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_compose_cluster_serves_re_forms_after_a_killed_node_and_leaves_nothing_behind() {
    let Some(model) = smollm2() else { return };
    if !available() {
        return;
    }
    let pid = std::process::id();
    let image = format!("swactor:it-{pid}");
    let script = root().join("deploy/cluster");
    let bin = assert_cmd::cargo::cargo_bin("swactor");
    run(&script, &["image".as_ref(), bin.as_os_str()], &image);
    let state = crate::support::scratch().join("compose-state");
    let _ = std::fs::remove_dir_all(&state);
    let port = free_port();
    let subnet = format!("10.213.{}", 100 + pid % 100);
    let env = run(
        &script,
        &[
            "init".as_ref(),
            model.as_os_str(),
            state.as_os_str(),
            port.to_string().as_ref(),
            subnet.as_ref(),
        ],
        &image,
    );
    let project = format!("swactor-it-{pid}");
    let cluster = Cluster { project: project.clone(), env: PathBuf::from(env), image };
    cluster.up();
    let url = format!("http://127.0.0.1:{port}");
    wait_health(&url, 200, Duration::from_secs(180), &cluster);

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    let chat = json!({"messages": [{"role": "user", "content": "What is the capital of France?"}],
                      "stream": true, "max_tokens": 16, "temperature": 0});
    let a = rt.block_on(post_raw(
        &format!("{url}/v1/chat/completions"),
        chat.to_string().into_bytes(),
        None,
    ));
    assert_eq!(a.status, 200, "{}", a.body);
    let events = a.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{}", a.body);
    assert!(events.len() > 3, "{}", a.body);

    // A node container dies mid-stream: the session re-forms over the two nodes left and
    // the stream goes on to its end without an error; the node starts again with its key
    // and the server serves on.
    let stream_url = format!("{url}/v1/completions");
    let stream = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        let body = json!({"prompt": "Once upon a time", "max_tokens": 200, "temperature": 0,
                          "stream": true});
        rt.block_on(post_raw(&stream_url, body.to_string().into_bytes(), None))
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(&metrics_of(&url), "swactor_generation_tokens_total") < 8.0 {
        assert!(Instant::now() < deadline, "no tokens; logs:\n{}", cluster.logs());
        std::thread::sleep(Duration::from_millis(20));
    }
    let node3 = format!("{project}_node3_1");
    let out = Command::new("docker").args(["kill", &node3]).output().expect("kill");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let a = stream.join().expect("stream");
    assert_eq!(a.status, 200, "{}", a.body);
    let events = a.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"), "{}", a.body);
    assert!(!a.body.contains("\"error\""), "the stream resumed: {}", a.body);
    wait_health(&url, 200, Duration::from_secs(60), &cluster);
    let out = cluster.compose(&["start", "node3"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let body = json!({"prompt": "Once upon a time", "max_tokens": 8}).to_string().into_bytes();
    let later = rt.block_on(post_raw(&format!("{url}/v1/completions"), body, None));
    assert_eq!(later.status, 200, "{}", later.body);

    drop(cluster);
    let label = format!("label=com.docker.compose.project={project}");
    assert!(docker_lines(&["ps", "-aq", "--filter", &label]).is_empty(), "containers left");
    assert!(docker_lines(&["network", "ls", "-q", "--filter", &label]).is_empty(), "networks left");
    assert!(docker_lines(&["volume", "ls", "-q", "--filter", &label]).is_empty(), "volumes left");
}
