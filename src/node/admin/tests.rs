use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ClaimError, Refresh, claim, serve};
use crate::node::inspect::{EdgeInspect, REFUSALS_KEPT};
use crate::wire::reason::{BootFault, ControlFault, StreamFault};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("rt")
}

#[test]
fn a_regular_file_or_a_directory_at_the_path_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().expect("dir");
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, b"precious bytes").expect("write");
    let sub = dir.path().join("a-dir");
    std::fs::create_dir(&sub).expect("mkdir");
    std::fs::write(sub.join("inside"), b"x").expect("write");
    let rt = runtime();
    let _guard = rt.enter();
    for path in [&file, &sub] {
        let err = claim(path).expect_err("refused");
        assert!(matches!(err, ClaimError::InUse { .. }), "{err}");
        assert_eq!(err.boot_fault(), BootFault::AdminSocketInUse);
    }
    assert_eq!(std::fs::read(&file).expect("file"), b"precious bytes");
    assert_eq!(std::fs::read(sub.join("inside")).expect("file"), b"x");
}

#[test]
fn a_stale_socket_is_replaced_and_a_live_one_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("admin.sock");
    // A socket nobody listens on any more: its node died without removing it.
    drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
    assert!(path.exists());
    let rt = runtime();
    let _guard = rt.enter();
    let (socket, _listener) = claim(&path).expect("a stale socket is replaced");
    assert_eq!(socket.path(), path);
    let err = claim(&path).expect_err("a live socket is refused");
    assert!(err.to_string().contains("live node"), "{err}");
    assert_eq!(err.boot_fault(), BootFault::AdminSocketInUse);
    drop(socket);
    assert!(!path.exists(), "our own socket is removed at shutdown");
}

#[test]
fn shutdown_leaves_a_path_that_something_else_took_over_meanwhile() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("admin.sock");
    let rt = runtime();
    let _guard = rt.enter();
    let (socket, listener) = claim(&path).expect("claim");
    // Someone removed our socket and put their own file there.
    drop(listener);
    std::fs::remove_file(&path).expect("rm");
    std::fs::write(&path, b"theirs").expect("write");
    drop(socket);
    assert_eq!(std::fs::read(&path).expect("kept"), b"theirs");
    // Or a socket of their own, with another inode.
    std::fs::remove_file(&path).expect("rm");
    let (socket, _listener) = claim(&path).expect("claim");
    std::fs::remove_file(&path).expect("rm");
    let _theirs = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    drop(socket);
    assert!(path.exists(), "another socket at the path is not ours to remove");
}

#[test]
fn a_client_that_never_reads_does_not_hold_up_the_next_one() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("admin.sock");
    // A snapshot far larger than a socket buffer: a client that never reads blocks its
    // writer.
    let inspect = EdgeInspect {
        edges: (0..4000)
            .map(|i| serde_json::json!({ "edge_id": i, "pad": "x".repeat(200) }))
            .collect(),
        ..EdgeInspect::default()
    };
    let rt = runtime();
    let listener = {
        let _guard = rt.enter();
        claim(&path).expect("claim")
    };
    let (_socket, listener) = listener;
    let inspect = Arc::new(Mutex::new(inspect));
    let refresh = refresher(&rt, Arc::clone(&inspect), |_| {});
    rt.spawn(serve(listener, inspect, refresh));
    let _stuck = std::os::unix::net::UnixStream::connect(&path).expect("connect");
    let mut second = std::os::unix::net::UnixStream::connect(&path).expect("connect");
    second.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut body = String::new();
    second.read_to_string(&mut body).expect("the second client is answered");
    let state: EdgeInspect = serde_json::from_str(body.trim()).expect("json");
    assert_eq!(state.edges.len(), 4000);
}

/// A stand-in for the node's loop: answers each refresh after applying `update`.
fn refresher(
    rt: &tokio::runtime::Runtime,
    inspect: Arc<Mutex<EdgeInspect>>,
    update: impl Fn(&mut EdgeInspect) + Send + 'static,
) -> Refresh {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<tokio::sync::oneshot::Sender<()>>();
    rt.spawn(async move {
        while let Some(done) = rx.recv().await {
            update(&mut inspect.lock().unwrap_or_else(|e| e.into_inner()));
            let _ = done.send(());
        }
    });
    tx
}

#[test]
fn each_answer_shows_the_view_as_the_node_loop_brought_it_up_to_date_for_it() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("admin.sock");
    let rt = runtime();
    let (_socket, listener) = {
        let _guard = rt.enter();
        claim(&path).expect("claim")
    };
    let inspect = Arc::new(Mutex::new(EdgeInspect::default()));
    let refresh = refresher(&rt, Arc::clone(&inspect), |s| s.arena_leases += 1);
    rt.spawn(serve(listener, inspect, refresh));
    for want in 1..=3 {
        let mut client = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        client.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut body = String::new();
        client.read_to_string(&mut body).expect("answered");
        let state: EdgeInspect = serde_json::from_str(body.trim()).expect("json");
        assert_eq!(state.arena_leases, want, "refreshed before answer {want}");
    }
}

#[test]
fn the_refusal_list_keeps_the_latest_lines_while_the_counts_keep_counting() {
    let mut inspect = EdgeInspect::default();
    for i in 0..1000 {
        inspect.record_refusal(
            ControlFault::UnauthorizedOrchestrator.into(),
            format!("session {i} refused"),
        );
    }
    inspect.record_refusal(StreamFault::UnknownEdge.into(), "edge stream refused".into());
    assert_eq!(inspect.refusals.len(), REFUSALS_KEPT);
    assert_eq!(inspect.refusals.last().map(String::as_str), Some("edge stream refused"));
    assert_eq!(inspect.refusals[0], format!("session {} refused", 1001 - REFUSALS_KEPT));
    assert_eq!(inspect.refused["unauthorized_orchestrator"], 1000);
    assert_eq!(inspect.refused["unknown_edge"], 1);
}
