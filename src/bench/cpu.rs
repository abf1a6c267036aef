//! Which CPU a benchmark ran on: its model name and the instruction-set flags the
//! engine's kernel tiers (and llama.cpp's builds) depend on, read from `/proc/cpuinfo`.

use serde::Serialize;

/// The CPU, as benchmarks print it beside their tables.
#[derive(Debug, Clone, Serialize)]
pub struct CpuSummary {
    /// `model name` of the first processor (`unknown` where it cannot be read).
    pub model: String,
    /// The flags among those the kernels care about, in a fixed order.
    pub flags: Vec<String>,
    /// The engine's kernel tier for this process (the widest the CPU runs, or the one
    /// `SWACTOR_ENGINE_ISA` names).
    pub engine_isa: String,
    /// Memory read bandwidth measured when the summary was taken, GB/s, at one thread and
    /// at one per core (`None` in a summary of text alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bandwidth_gbps: Option<(f64, f64)>,
}

/// Flags that decide a kernel tier, in the order they are printed.
const FLAGS: [&str; 13] = [
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "amx_int8",
    "asimd",
    "asimddp",
    "i8mm",
    "sve",
];

/// The summary of `cpuinfo`'s text (the first processor's entry).
pub fn summarize(cpuinfo: &str, engine_isa: &str) -> CpuSummary {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    let model = field("model name").unwrap_or_else(|| "unknown".into());
    // x86 names its features `flags`, ARM64 `Features`.
    let present: Vec<String> = field("flags")
        .or_else(|| field("Features"))
        .map(|f| f.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    let flags = FLAGS.iter().filter(|f| present.iter().any(|p| p == *f)).map(|f| f.to_string());
    CpuSummary {
        model,
        flags: flags.collect(),
        engine_isa: engine_isa.to_string(),
        bandwidth_gbps: None,
    }
}

/// This machine's CPU, with its memory read bandwidth measured now.
pub fn this_cpu() -> CpuSummary {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let bandwidth = (super::products::read_bandwidth(1), super::products::read_bandwidth(cores));
    CpuSummary {
        bandwidth_gbps: Some(bandwidth),
        ..summarize(&text, crate::model::engine::isa().name())
    }
}

impl std::fmt::Display for CpuSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CPU: {} [{}]; engine kernels: {}",
            self.model,
            self.flags.join(" "),
            self.engine_isa
        )?;
        if let Some((one, all)) = self.bandwidth_gbps {
            write!(f, "; memory read {one:.1} GB/s at 1 thread, {all:.1} at one per core")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_the_model_and_only_the_flags_that_pick_a_kernel_tier() {
        let text = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu sse2 avx2 fma f16c bmi2\n\nprocessor\t: 1\nmodel name\t: other\n";
        let s = summarize(text, "avx2");
        assert_eq!(s.model, "AMD EPYC 7B13");
        assert_eq!(s.flags, ["avx2", "fma", "f16c"]);
        assert_eq!(s.to_string(), "CPU: AMD EPYC 7B13 [avx2 fma f16c]; engine kernels: avx2");
        assert_eq!(summarize("", "scalar").model, "unknown");
        let arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes asimddp i8mm\n";
        assert_eq!(summarize(arm, "neon-dotprod").flags, ["asimd", "asimddp", "i8mm"]);
    }
}
