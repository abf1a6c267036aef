//! Hosts behind wide-area links, in network namespaces (root only): the topology of the WAN
//! suite and of `bench wan` (`specs/wan.md`).
//!
//! A router namespace holds the links; the coordinator (orchestrator, relay) and each host
//! have a namespace of their own, joined to the router by a veth pair (`10.S.I.2` on the
//! host, `10.S.I.1` on the router; the coordinator is host 0) and routing through it. A
//! host's QUIC port ([`QUIC_PORT`]) is reached only through its link (`swactor util
//! wan-link` in the router, listening on `10.S.I.1`): the router forwards everything
//! between namespaces but datagrams to or from that port, so iroh's direct paths to a host
//! (which would skip its link on one machine) fail as they would behind a real NAT, while
//! SWIM ([`SWIM_PORT`]) and the coordinator's own ports go directly. Every connection into
//! a host then crosses its link both ways. For relay-only hosts ([`Exposure::None`]) the
//! router also drops every datagram sent to a host's SWIM port: a host exposes no port at
//! all, as behind a NAT, and its membership must come through the relay. Dropped:
//! everything left in the namespaces is killed and the namespaces removed.

use std::process::{Command, Stdio};

/// The port each host's node listens on for QUIC.
pub const QUIC_PORT: u16 = 7401;

/// The port each host's node listens on for SWIM.
pub const SWIM_PORT: u16 = 7501;

/// What a host exposes to the others through the router.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exposure {
    /// Its SWIM port (its QUIC port only through its link).
    Swim,
    /// Nothing: datagrams to its SWIM port are dropped too (it may still send from it).
    None,
}

/// Host namespaces behind a router namespace.
pub struct WanNet {
    /// The router namespace, then host `0..=n`'s (0: the coordinator).
    namespaces: Vec<String>,
    subnet: u8,
}

/// Runs `ip ARGS`; whether it succeeded.
fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl WanNet {
    /// Namespaces `<tag>-r` (the router), `<tag>-0` (the coordinator) and `<tag>-1..=hosts`
    /// on `10.<subnet>.0.0/16`, the hosts exposing `exposure`; `Err` says what could not be
    /// made (not root, no `ip` or `iptables`). Whatever was made is removed.
    pub fn up(tag: &str, hosts: u8, subnet: u8, exposure: Exposure) -> Result<WanNet, String> {
        let router = format!("{tag}-r");
        let mut net = WanNet { namespaces: Vec::new(), subnet };
        let step = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
        step(ip(&["netns", "add", &router]), "ip netns add (root and iproute2 are needed)")?;
        net.namespaces.push(router.clone());
        step(ip(&["-n", &router, "link", "set", "lo", "up"]), "router loopback")?;
        let forward = net.exec_plain(0, "sysctl", &["-qw", "net.ipv4.ip_forward=1"]);
        step(forward, "router forwarding (sysctl)")?;
        for port in [QUIC_PORT.to_string()] {
            for dir in ["--dport", "--sport"] {
                let args = ["-A", "FORWARD", "-p", "udp", dir, &port, "-j", "DROP"];
                step(net.exec_plain(0, "iptables", &args), "router filter (iptables)")?;
            }
        }
        if exposure == Exposure::None {
            let port = SWIM_PORT.to_string();
            let args = ["-A", "FORWARD", "-p", "udp", "--dport", &port, "-j", "DROP"];
            step(net.exec_plain(0, "iptables", &args), "router filter (iptables)")?;
        }
        for i in 0..=hosts {
            let ns = format!("{tag}-{i}");
            let (r_end, h_end) = (format!("{tag}r{i}"), format!("{tag}h{i}"));
            step(ip(&["netns", "add", &ns]), "ip netns add")?;
            net.namespaces.push(ns.clone());
            let (r_addr, h_addr) = (net.router_addr(i), net.host_addr(i));
            let ok = ip(&["link", "add", &r_end, "type", "veth", "peer", "name", &h_end])
                && ip(&["link", "set", &r_end, "netns", &router])
                && ip(&["link", "set", &h_end, "netns", &ns])
                && ip(&["-n", &router, "addr", "add", &format!("{r_addr}/24"), "dev", &r_end])
                && ip(&["-n", &router, "link", "set", &r_end, "up"])
                && ip(&["-n", &ns, "addr", "add", &format!("{h_addr}/24"), "dev", &h_end])
                && ip(&["-n", &ns, "link", "set", &h_end, "up"])
                && ip(&["-n", &ns, "link", "set", "lo", "up"])
                && ip(&["-n", &ns, "route", "add", "default", "via", &r_addr]);
            step(ok, "veth pair")?;
        }
        Ok(net)
    }

    /// Host `i`'s own address (0: the coordinator's).
    pub fn host_addr(&self, i: u8) -> String {
        format!("10.{}.{i}.2", self.subnet)
    }

    /// The router's address toward host `i`: where host `i`'s link listens.
    pub fn router_addr(&self, i: u8) -> String {
        format!("10.{}.{i}.1", self.subnet)
    }

    /// `program` in the router's namespace (where the links run).
    pub fn router(&self, program: &std::path::Path) -> Command {
        self.command(0, program)
    }

    /// `program` in host `i`'s namespace (0: the coordinator's).
    pub fn host(&self, i: u8, program: &std::path::Path) -> Command {
        self.command(usize::from(i) + 1, program)
    }

    /// `program` in namespace `k` of [`WanNet::namespaces`].
    fn command(&self, k: usize, program: &std::path::Path) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.namespaces[k]]).arg(program);
        cmd
    }

    /// Runs `program ARGS` in namespace `k`; whether it succeeded.
    fn exec_plain(&self, k: usize, program: &str, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.namespaces[k], program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for WanNet {
    fn drop(&mut self) {
        for ns in self.namespaces.iter().rev() {
            if let Ok(out) = Command::new("ip").args(["netns", "pids", ns]).output() {
                for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                    let _ = Command::new("kill").args(["-9", pid]).status();
                }
            }
            ip(&["netns", "del", ns]);
        }
    }
}
