//! What `orchestrate pool` is waiting for, said on stderr in text mode: which pool nodes
//! are not available yet and why ("waiting for node 2 (no answer yet), node 3 (refused:
//! ...)"). Built only from what the driver tells its sink while the pool converges: its
//! events (`node_available`, `node_faulted`, `pool_ready`) and its progress messages
//! (`node N refused the control session: ...`, `node N left; ...`).

use std::collections::BTreeMap;

use crate::events::Event;
use crate::wire::NodeId;

/// Why a node is not available yet.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    NoAnswer,
    Available,
    Refused(String),
    Faulted(String),
    Left,
}

/// The nodes a pool run waits for, and the line that says so.
#[derive(Debug, Clone)]
pub struct PoolWait {
    nodes: BTreeMap<NodeId, Status>,
    last: Option<String>,
    done: bool,
}

impl PoolWait {
    /// Waiting for `nodes` (the pool file's), none of which has answered yet.
    pub fn new(nodes: impl IntoIterator<Item = NodeId>) -> PoolWait {
        let nodes = nodes.into_iter().map(|n| (n, Status::NoAnswer)).collect();
        PoolWait { nodes, last: None, done: false }
    }

    /// One event of the run; returns the line to print if what it waits for changed.
    pub fn event(&mut self, event: &Event) -> Option<String> {
        match event {
            Event::NodeAvailable { node_id, .. } => self.set(*node_id, Status::Available),
            Event::NodeFaulted { node_id, reason, .. } => {
                self.set(*node_id, Status::Faulted(reason.as_str().to_string()));
            }
            Event::PoolReady { .. } | Event::RunPlanned { .. } => self.done = true,
            _ => return None,
        }
        self.line()
    }

    /// One progress message of the driver; returns the line to print if what it waits for
    /// changed.
    pub fn message(&mut self, message: &str) -> Option<String> {
        let node = |rest: &str| rest.split_whitespace().next().and_then(|n| n.parse().ok());
        if let Some(rest) = message.strip_prefix("node ") {
            if let Some((id, why)) = rest.split_once(" refused the control session: ")
                && let Some(id) = node(id)
            {
                self.set(NodeId(id), Status::Refused(why.to_string()));
            } else if let Some((id, _)) = rest.split_once(" left")
                && let Some(id) = node(id)
            {
                self.set(NodeId(id), Status::Left);
            }
        }
        self.line()
    }

    fn set(&mut self, node: NodeId, status: Status) {
        if let Some(s) = self.nodes.get_mut(&node) {
            *s = status;
        }
    }

    /// "waiting for node 2 (no answer yet), ..." when it differs from the last line said.
    fn line(&mut self) -> Option<String> {
        if self.done {
            return None;
        }
        let waiting: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|(id, s)| {
                let why = match s {
                    Status::Available => return None,
                    Status::NoAnswer => "no answer yet".to_string(),
                    Status::Refused(r) => format!("refused: {r}"),
                    Status::Faulted(r) => format!("faulted: {r}"),
                    Status::Left => "left the pool".to_string(),
                };
                Some(format!("node {id} ({why})"))
            })
            .collect();
        let line = if waiting.is_empty() {
            "every node is available; waiting for the pool to converge".to_string()
        } else {
            format!("waiting for {}", waiting.join(", "))
        };
        if self.last.as_ref() == Some(&line) {
            return None;
        }
        self.last = Some(line.clone());
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_missing_node_and_why_and_says_nothing_twice_or_after_ready() {
        let mut w = PoolWait::new([NodeId(1), NodeId(2), NodeId(3)]);
        let first = w.message("waiting for 3 nodes");
        assert_eq!(
            first.as_deref(),
            Some(
                "waiting for node 1 (no answer yet), node 2 (no answer yet), node 3 (no answer yet)"
            )
        );
        assert_eq!(w.message("waiting for 3 nodes"), None, "said once");
        let available =
            Event::NodeAvailable { node_id: NodeId(1), endpoint_id: String::new(), addrs: vec![] };
        w.event(&available);
        let refused = w.message("node 3 refused the control session: busy with run 4");
        assert_eq!(
            refused.as_deref(),
            Some("waiting for node 2 (no answer yet), node 3 (refused: busy with run 4)")
        );
        assert_eq!(w.event(&Event::PoolReady { nodes: vec![NodeId(1)] }), None);
        assert_eq!(w.message("node 2 left; waiting for the pool again"), None);
    }
}
