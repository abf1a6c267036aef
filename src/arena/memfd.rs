//! The arena mechanism: one sparse memfd per node, truncated to its ceiling, mapped once.
//!
//! The node creates it; the worker process inherits the descriptor (its number and size in
//! [`ARENA_FD_ENV`] / [`ARENA_BYTES_ENV`]) and maps the same pages. Nobody remaps or
//! resizes it. The arena is address space only: rings built on [`RingLayout`]s carve it up.
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use memmap2::{MmapOptions, MmapRaw};
use thiserror::Error;

use crate::wire::RingLayout;
use crate::wire::reason::BootFault;

/// Environment variable holding the inherited arena descriptor's number.
pub const ARENA_FD_ENV: &str = "SWACTOR_ARENA_FD";
/// Environment variable holding the arena's size in bytes.
pub const ARENA_BYTES_ENV: &str = "SWACTOR_ARENA_BYTES";

/// Why an arena could not be created, mapped or carved.
#[derive(Debug, Error)]
pub enum ArenaError {
    /// `memfd_create` or `ftruncate` failed.
    #[error("cannot create a {bytes}-byte memfd arena: {source}")]
    Create {
        /// Requested size.
        bytes: u64,
        /// The system error.
        #[source]
        source: std::io::Error,
    },
    /// `mmap` failed.
    #[error("cannot map the arena: {0}")]
    Map(#[source] std::io::Error),
    /// The inherited descriptor is missing, invalid or smaller than announced.
    #[error("inherited arena descriptor is unusable: {0}")]
    BadDescriptor(String),
    /// A ring layout does not fit this arena.
    #[error("ring layout outside the arena: {0}")]
    Layout(String),
}

impl ArenaError {
    /// The boot fault this error means for a node.
    pub fn boot_fault(&self) -> BootFault {
        match self {
            ArenaError::Create { .. } | ArenaError::BadDescriptor(_) => BootFault::ArenaCreate,
            ArenaError::Map(_) | ArenaError::Layout(_) => BootFault::ArenaMap,
        }
    }
}

/// A mapped memfd arena.
#[derive(Debug)]
pub struct Arena {
    file: File,
    map: MmapRaw,
    bytes: u64,
}

impl Arena {
    /// Creates a sparse memfd of `bytes` bytes and maps it. The descriptor is inheritable
    /// (no close-on-exec) so a worker process spawned later sees it.
    pub fn create(bytes: u64) -> Result<Arena, ArenaError> {
        use rustix::fs::{MemfdFlags, ftruncate, memfd_create};
        let create = |e: rustix::io::Errno| ArenaError::Create { bytes, source: e.into() };
        if bytes == 0 {
            return Err(ArenaError::Create {
                bytes,
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "size 0"),
            });
        }
        let fd: OwnedFd = memfd_create("swactor-arena", MemfdFlags::empty()).map_err(create)?;
        ftruncate(&fd, bytes).map_err(create)?;
        Arena::map(File::from(fd), bytes)
    }

    /// Maps an inherited arena named by [`ARENA_FD_ENV`] and [`ARENA_BYTES_ENV`].
    pub fn from_env() -> Result<Arena, ArenaError> {
        let var = |name: &str| {
            std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok()).ok_or_else(|| {
                ArenaError::BadDescriptor(format!("{name} is missing or not a number"))
            })
        };
        let fd = var(ARENA_FD_ENV)?;
        let bytes = var(ARENA_BYTES_ENV)?;
        let fd =
            RawFd::try_from(fd).map_err(|_| ArenaError::BadDescriptor("fd out of range".into()))?;
        Arena::from_inherited_fd(fd, bytes)
    }

    /// Maps an inherited descriptor of an arena of `bytes` bytes. Takes ownership of `fd`.
    pub fn from_inherited_fd(fd: RawFd, bytes: u64) -> Result<Arena, ArenaError> {
        // Check the descriptor before taking ownership of it.
        let borrowed = fd_is_open(fd)
            .ok_or_else(|| ArenaError::BadDescriptor(format!("fd {fd} is not open")))?;
        if borrowed < bytes {
            return Err(ArenaError::BadDescriptor(format!(
                "fd {fd} holds {borrowed} bytes, {bytes} announced"
            )));
        }
        // SAFETY: `fd` is open (checked above) and was inherited for this process's
        // exclusive use as the arena; nothing else in this process owns or closes it.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        Arena::map(File::from(owned), bytes)
    }

    fn map(file: File, bytes: u64) -> Result<Arena, ArenaError> {
        let len = usize::try_from(bytes)
            .map_err(|_| ArenaError::Map(std::io::Error::other("arena too large")))?;
        let map = MmapOptions::new().len(len).map_raw(&file).map_err(ArenaError::Map)?;
        Ok(Arena { file, map, bytes })
    }

    /// The descriptor to hand to a worker.
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.bytes
    }

    /// Whether the arena is empty (never: a zero size is refused).
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// The bytes of a ring lease, checked against the arena. Keeps the arena alive.
    pub fn region(self: &Arc<Self>, layout: &RingLayout) -> Result<ArenaRegion, ArenaError> {
        layout.validate(self.bytes).map_err(|e| ArenaError::Layout(e.to_string()))?;
        Ok(ArenaRegion {
            arena: Arc::clone(self),
            offset: layout.arena_offset,
            len: layout.total_len,
        })
    }
}

fn fd_is_open(fd: RawFd) -> Option<u64> {
    // SAFETY: the borrow lives only for this call and the descriptor is not closed during
    // it; `fstat` on a closed descriptor returns EBADF rather than touching memory.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    rustix::fs::fstat(borrowed).ok().map(|st| st.st_size as u64)
}

/// One lease's bytes inside an [`Arena`]: header area then data area.
#[derive(Debug, Clone)]
pub struct ArenaRegion {
    arena: Arc<Arena>,
    offset: u64,
    len: u64,
}

// SAFETY: the region is a range of a shared mapping that lives as long as `arena`; all
// concurrent access to it goes through the ring protocol (atomics for cursors, the SPSC
// discipline for data), never through references that alias mutably.
unsafe impl Send for ArenaRegion {}
// SAFETY: as above; `&ArenaRegion` only hands out raw pointers.
unsafe impl Sync for ArenaRegion {}

impl crate::ring::RawRegion for ArenaRegion {
    fn base(&self) -> *mut u8 {
        // SAFETY: `offset + len <= arena.len()` was checked by `Arena::region`, so the
        // pointer stays inside the mapping.
        unsafe { self.arena.map.as_mut_ptr().add(self.offset as usize) }
    }

    fn len(&self) -> u64 {
        self.len
    }
}
