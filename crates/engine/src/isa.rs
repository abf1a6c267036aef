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
}

impl Isa {
    /// The best kernel family this CPU runs.
    pub fn detect() -> Isa {
        *Isa::available().last().unwrap_or(&Isa::Scalar)
    }

    /// Every kernel family this CPU runs, the reference first.
    pub fn available() -> Vec<Isa> {
        [Isa::Scalar, Isa::Avx2, Isa::Avx512].into_iter().filter(|i| i.is_available()).collect()
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
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Parses `scalar`, `avx2` or `avx512`.
    pub fn parse(text: &str) -> Option<Isa> {
        match text {
            "scalar" => Some(Isa::Scalar),
            "avx2" => Some(Isa::Avx2),
            "avx512" => Some(Isa::Avx512),
            _ => None,
        }
    }

    /// The name [`Isa::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }
}
