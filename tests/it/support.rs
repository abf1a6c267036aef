//! Shared test helpers: synthesized models, pool files, a raw GGUF builder.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use swactor::model::synth::{SynthSpec, write_model};
use swactor::planner::Pool;
use swactor::planner::pool::{OrchestratorEntry, PoolNode};
use swactor::wire::NodeId;

/// A directory that lives as long as the test binary.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("tempdir")).path()
}

/// Writes (once) a synthesized model with `blocks` blocks and default shape.
pub fn synth_model(blocks: u32) -> PathBuf {
    let path = scratch().join(format!("synth-{blocks}.gguf"));
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        let spec = SynthSpec { blocks, ..SynthSpec::default() };
        write_model(&path, &spec).expect("synthesize model");
    }
    path
}

/// A pool of `n` nodes with ids 1..=n, 8 GiB each, orchestrator 100.
pub fn pool(n: u64) -> Pool {
    pool_with_memory(&vec![8 << 30; n as usize])
}

/// A pool whose node `i + 1` has `memory[i]` bytes.
pub fn pool_with_memory(memory: &[u64]) -> Pool {
    Pool {
        orchestrator: OrchestratorEntry {
            node_id: NodeId(100),
            endpoint_id: None,
            addrs: vec![],
            relay: None,
        },
        nodes: memory
            .iter()
            .enumerate()
            .map(|(i, &m)| PoolNode {
                node_id: NodeId(i as u64 + 1),
                endpoint_id: format!("{:064x}", 0xfeed_0000 + i as u64),
                addrs: vec![format!("127.0.0.1:{}", 7400 + i).parse().expect("addr")],
                relay: None,
                memory_bytes: m,
                device: None,
                prompt_cache_bytes: None,
                arena_bytes: None,
                speed: None,
                rtt_us: None,
                links: Vec::new(),
            })
            .collect(),
        placement: None,
    }
}

/// Writes a pool file for `pool` and returns its path.
pub fn pool_file(name: &str, pool: &Pool) -> PathBuf {
    let path = scratch().join(name);
    std::fs::write(&path, pool.to_toml()).expect("write pool file");
    path
}

/// A GGUF metadata value for [`GgufBuilder`].
#[derive(Debug, Clone)]
pub enum Meta {
    U32(u32),
    U64(u64),
    F32(f32),
    Str(String),
    StrArray(Vec<String>),
    I32Array(Vec<i32>),
    /// An array header claiming `len` elements of GGUF type `elem`, with none written.
    ArrayClaim {
        elem: u32,
        len: u64,
    },
}

/// Builds raw GGUF v3 bytes by hand, so tests can write files candle never would.
#[derive(Default, Clone)]
pub struct GgufBuilder {
    meta: Vec<(String, Meta)>,
    tensors: Vec<(String, Vec<u64>, u32, u64)>,
    data_len: u64,
    counts: (Option<u64>, Option<u64>),
}

impl GgufBuilder {
    /// Writes these tensor and metadata counts in the header instead of the real ones.
    pub fn claim_counts(mut self, tensors: Option<u64>, kv: Option<u64>) -> Self {
        self.counts = (tensors, kv);
        self
    }

    /// Replaces tensor `index`'s dimensions and / or offset as written (the data section
    /// keeps its size).
    pub fn patch_tensor(
        mut self,
        index: usize,
        dims: Option<Vec<u64>>,
        offset: Option<u64>,
    ) -> Self {
        let t = &mut self.tensors[index];
        if let Some(d) = dims {
            t.1 = d;
        }
        if let Some(o) = offset {
            t.3 = o;
        }
        self
    }

    /// Sets `key` (in its place where the builder already has it, else last).
    pub fn meta(mut self, key: &str, value: Meta) -> Self {
        match self.meta.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.meta.push((key.to_string(), value)),
        }
        self
    }

    /// Adds a tensor with GGUF dims (innermost first), a raw GGML type id and its byte size.
    pub fn tensor(mut self, name: &str, dims: &[u64], ggml_type: u32, bytes: u64) -> Self {
        let offset = self.data_len;
        self.tensors.push((name.to_string(), dims.to_vec(), ggml_type, offset));
        self.data_len += bytes.div_ceil(32) * 32;
        self
    }

    /// The llama metadata of a tiny model with `blocks` blocks and hidden 64.
    pub fn llama(blocks: u32) -> Self {
        let mut b = GgufBuilder::default()
            .meta("general.architecture", Meta::Str("llama".into()))
            .meta("llama.block_count", Meta::U32(blocks))
            .meta("llama.embedding_length", Meta::U32(64))
            .meta("llama.attention.head_count", Meta::U32(4))
            .meta("llama.attention.head_count_kv", Meta::U32(2))
            .meta("llama.context_length", Meta::U32(256))
            .meta("llama.rope.freq_base", Meta::F32(10000.0))
            .meta(
                "tokenizer.ggml.tokens",
                Meta::StrArray((0..300).map(|i| format!("t{i}")).collect()),
            )
            .tensor("token_embd.weight", &[64, 300], 0, 64 * 300 * 4);
        for i in 0..blocks {
            b = b.tensor(&format!("blk.{i}.attn_q.weight"), &[64, 64], 0, 64 * 64 * 4);
        }
        b
    }

    /// The file's bytes.
    pub fn build(&self) -> Vec<u8> {
        fn string(out: &mut Vec<u8>, s: &str) {
            out.extend((s.len() as u64).to_le_bytes());
            out.extend(s.as_bytes());
        }
        let mut out = Vec::new();
        out.extend(b"GGUF");
        out.extend(3u32.to_le_bytes());
        out.extend(self.counts.0.unwrap_or(self.tensors.len() as u64).to_le_bytes());
        out.extend(self.counts.1.unwrap_or(self.meta.len() as u64).to_le_bytes());
        for (k, v) in &self.meta {
            string(&mut out, k);
            match v {
                Meta::U32(x) => {
                    out.extend(4u32.to_le_bytes());
                    out.extend(x.to_le_bytes());
                }
                Meta::U64(x) => {
                    out.extend(10u32.to_le_bytes());
                    out.extend(x.to_le_bytes());
                }
                Meta::F32(x) => {
                    out.extend(6u32.to_le_bytes());
                    out.extend(x.to_le_bytes());
                }
                Meta::ArrayClaim { elem, len } => {
                    out.extend(9u32.to_le_bytes());
                    out.extend(elem.to_le_bytes());
                    out.extend(len.to_le_bytes());
                }
                Meta::Str(s) => {
                    out.extend(8u32.to_le_bytes());
                    string(&mut out, s);
                }
                Meta::I32Array(a) => {
                    out.extend(9u32.to_le_bytes());
                    out.extend(5u32.to_le_bytes());
                    out.extend((a.len() as u64).to_le_bytes());
                    for x in a {
                        out.extend(x.to_le_bytes());
                    }
                }
                Meta::StrArray(a) => {
                    out.extend(9u32.to_le_bytes());
                    out.extend(8u32.to_le_bytes());
                    out.extend((a.len() as u64).to_le_bytes());
                    for s in a {
                        string(&mut out, s);
                    }
                }
            }
        }
        for (name, dims, ty, offset) in &self.tensors {
            string(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.to_le_bytes());
            out.extend(offset.to_le_bytes());
        }
        while out.len() % 32 != 0 {
            out.push(0);
        }
        out.resize(out.len() + self.data_len as usize, 0);
        out
    }

    /// Writes the file into the scratch directory.
    pub fn write(&self, name: &str) -> PathBuf {
        let path = scratch().join(name);
        std::fs::write(&path, self.build()).expect("write gguf");
        path
    }
}

/// The byte offset of the `u64` dimensions of tensor `name` in a GGUF v2/v3 file's
/// tensor infos (after its name and its `u32` dimension count).
pub fn tensor_dims_offset(bytes: &[u8], name: &str) -> usize {
    let mut needle = (name.len() as u64).to_le_bytes().to_vec();
    needle.extend(name.as_bytes());
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("tensor name in header");
    at + needle.len() + 4
}

/// The byte offset of the value of metadata `key` (after its name and its `u32` type).
pub fn metadata_value_offset(bytes: &[u8], key: &str) -> usize {
    let mut needle = (key.len() as u64).to_le_bytes().to_vec();
    needle.extend(key.as_bytes());
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("key in header");
    at + needle.len() + 4
}

/// Firewall rules on loopback that cut a set of UDP ports off; removed on drop.
pub struct Partition(Vec<Vec<String>>);

impl Partition {
    fn iptables(args: &[String]) -> bool {
        // `-w`: wait for the tables' lock instead of failing while another test holds it.
        std::process::Command::new("iptables")
            .arg("-w")
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// Drops every loopback UDP datagram to or from `ports`; `None` when the rules cannot
    /// be installed (not root, or no iptables).
    pub fn cut(ports: &[u16]) -> Option<Partition> {
        let mut p = Partition(Vec::new());
        for port in ports {
            for dir in ["--dport", "--sport"] {
                let rule: Vec<String> =
                    ["INPUT", "-i", "lo", "-p", "udp", dir, &port.to_string(), "-j", "DROP"]
                        .iter()
                        .map(|s| s.to_string())
                        .collect();
                let mut add = vec!["-I".to_string()];
                add.extend(rule.iter().cloned());
                if !Partition::iptables(&add) {
                    return None;
                }
                p.0.push(rule);
            }
        }
        Some(p)
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        for rule in &self.0 {
            let mut del = vec!["-D".to_string()];
            del.extend(rule.iter().cloned());
            Partition::iptables(&del);
        }
    }
}

pub fn port_of(addr: &serde_json::Value) -> u16 {
    addr.as_str()
        .and_then(|a| a.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .expect("address with a port")
}
