//! Which instruction set the kernels use, detected at run time.

/// A kernel family. [`Isa::Scalar`] is the portable reference every other is tested
/// against; the SIMD ones are used only where [`Isa::available`] says the CPU has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Portable Rust, no intrinsics: the reference.
    Scalar,
    /// AVX2 with FMA and F16C (256-bit).
    Avx2,
    /// AVX-512 F/BW/VL with VNNI (512-bit integer dot products), plus AVX2 for the
    /// formats that have no 512-bit kernel.
    Avx512,
    /// ARM64 baseline NEON (128-bit; every ARM64 core has it).
    Neon,
    /// ARM64 NEON with the `dotprod` extension (`sdot`: 8-bit dot products into 32-bit
    /// lanes), ARMv8.2 and later (Graviton 2+, Ampere, Apple, Cortex-A76+, Pi 5).
    NeonDot,
    /// [`Isa::NeonDot`] plus the `i8mm` extension (`smmla`: a 2 x 8 by 8 x 2 matrix of
    /// 8-bit values into four 32-bit lanes), which the repacked kernels use for pairs of
    /// activation rows (Graviton 3+, Neoverse V1/N2, Apple M2+, Cortex-A510/A710+).
    NeonI8mm,
}

impl Isa {
    /// Every kernel family, in order of preference (later is better on a CPU that has it).
    pub const ALL: [Isa; 6] =
        [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon, Isa::NeonDot, Isa::NeonI8mm];

    /// The best kernel family this CPU runs.
    pub fn detect() -> Isa {
        *Isa::available().last().unwrap_or(&Isa::Scalar)
    }

    /// Every kernel family this CPU runs, the reference first.
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.is_available()).collect()
    }

    /// Whether this CPU runs `self` (no allocation: the kernels ask on every selection).
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                    && std::arch::is_x86_feature_detected!("f16c")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                Isa::Avx2.is_available()
                    && std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512vnni")
            }
            #[cfg(target_arch = "aarch64")]
            Isa::Neon => std::arch::is_aarch64_feature_detected!("neon"),
            #[cfg(target_arch = "aarch64")]
            Isa::NeonDot => {
                Isa::Neon.is_available() && std::arch::is_aarch64_feature_detected!("dotprod")
            }
            #[cfg(target_arch = "aarch64")]
            Isa::NeonI8mm => {
                Isa::NeonDot.is_available() && std::arch::is_aarch64_feature_detected!("i8mm")
            }
            #[cfg(not(target_arch = "x86_64"))]
            Isa::Avx2 | Isa::Avx512 => false,
            #[cfg(not(target_arch = "aarch64"))]
            Isa::Neon | Isa::NeonDot | Isa::NeonI8mm => false,
        }
    }

    /// Parses `scalar`, `avx2`, `avx512`, `neon`, `neon-dotprod` or `neon-i8mm`.
    pub fn parse(text: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name() == text)
    }

    /// The name [`Isa::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
            Isa::NeonDot => "neon-dotprod",
            Isa::NeonI8mm => "neon-i8mm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU's features as the kernel reports them (`/proc/cpuinfo`'s `flags` on x86,
    /// `Features` on ARM64), read apart from the detection the kernels use.
    fn reported_features() -> Option<std::collections::HashSet<String>> {
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let features = info
            .lines()
            .filter(|l| l.starts_with("flags") || l.starts_with("Features"))
            .flat_map(|l| l.split(':').nth(1).unwrap_or("").split_whitespace())
            .map(str::to_string)
            .collect();
        Some(features)
    }

    #[test]
    fn every_tier_the_cpu_reports_is_one_the_kernels_run_so_its_kernel_tests_are_never_skipped() {
        // The kernel tests run every tier of `Isa::available()`: a tier missing there is
        // a tier whose kernels went untested on a CPU that has them.
        let Some(features) = reported_features() else {
            assert!(std::env::var_os("CI").is_none(), "/proc/cpuinfo is unreadable under CI");
            return;
        };
        #[cfg(target_arch = "x86_64")]
        let tiers: &[(Isa, &[&str])] = &[
            (Isa::Avx2, &["avx2", "fma", "f16c"]),
            (
                Isa::Avx512,
                &["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni"],
            ),
        ];
        #[cfg(target_arch = "aarch64")]
        let tiers: &[(Isa, &[&str])] = &[
            (Isa::Neon, &["asimd"]),
            (Isa::NeonDot, &["asimddp"]),
            (Isa::NeonI8mm, &["asimddp", "i8mm"]),
        ];
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        let tiers: &[(Isa, &[&str])] = &[];
        for (isa, needs) in tiers {
            if needs.iter().all(|f| features.contains(*f)) {
                assert!(
                    Isa::available().contains(isa),
                    "the CPU reports {needs:?} but the {} kernels are not run (nor tested)",
                    isa.name()
                );
            }
        }
        // AVX-512 BF16 is a kernel of the AVX-512 tier (BF16 weights through `vdpbf16ps`),
        // tested beside that tier's FMA kernel where the CPU has it.
        #[cfg(target_arch = "x86_64")]
        if features.contains("avx512_bf16") && Isa::Avx512.is_available() {
            let name = crate::kernels::kernel_name(Isa::Avx512, crate::format::WeightFormat::BF16);
            assert_eq!(name, "avx512+bf16", "the CPU reports avx512_bf16 but BF16 does not use it");
        }
        let names: Vec<&str> = Isa::available().iter().map(|i| i.name()).collect();
        eprintln!("kernel tiers tested on this CPU: {names:?}");
    }

    #[test]
    fn every_tier_name_parses_back_to_its_tier() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()), Some(isa));
        }
        assert_eq!(Isa::parse("sse2"), None);
    }
}
