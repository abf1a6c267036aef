//! The device bridge: where a worker keeps objects, and how bytes move between ring spans
//! (host) and device memory.
//!
//! Copies are synchronous: when `host_to_device` returns, the ring span may be released;
//! when `device_to_host` returns, the ring span holds the bytes. Handles carry the worker
//! generation that minted them; a handle of another generation is rejected as stale.

use std::collections::HashMap;

use super::protocol::DeviceHandle;
use crate::wire::WorkerGeneration;
use crate::wire::reason::DeviceFailure;

/// Device memory operations a worker needs.
pub trait DeviceBridge: Send {
    /// The generation whose handles this bridge mints.
    fn generation(&self) -> WorkerGeneration;
    /// Allocates an object of `bytes` bytes.
    fn alloc(&mut self, bytes: u64) -> Result<DeviceHandle, DeviceFailure>;
    /// Frees an object.
    fn free(&mut self, handle: DeviceHandle) -> Result<(), DeviceFailure>;
    /// Copies host bytes into an object at `offset`; the source may be reused on return.
    fn host_to_device(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        src: &[u8],
    ) -> Result<(), DeviceFailure>;
    /// Copies an object's bytes at `offset` into host memory; complete on return.
    fn device_to_host(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), DeviceFailure>;
    /// Read access for compute (a host view on the CPU backend; device backends fail with
    /// `copy_failed` and compute copies through [`DeviceBridge::host_copy`]).
    fn view(&self, handle: DeviceHandle) -> Result<&[u8], DeviceFailure>;
    /// The object's bytes on the host: borrowed where the backend keeps them there,
    /// copied otherwise.
    fn host_copy(
        &mut self,
        handle: DeviceHandle,
    ) -> Result<std::borrow::Cow<'_, [u8]>, DeviceFailure> {
        let len = usize::try_from(self.size(handle)?).map_err(|_| DeviceFailure::CopyFailed)?;
        let mut buf = vec![0u8; len];
        self.device_to_host(handle, 0, &mut buf)?;
        Ok(std::borrow::Cow::Owned(buf))
    }
    /// Size of an object.
    fn size(&self, handle: DeviceHandle) -> Result<u64, DeviceFailure>;
    /// Number of live objects.
    fn live(&self) -> usize;
}

/// The byte range `offset..offset + n` of an object of `len` bytes, or `copy_failed` when
/// it does not fit. Every backend checks copies with it.
pub fn copy_range(
    len: usize,
    offset: u64,
    n: usize,
) -> Result<std::ops::Range<usize>, DeviceFailure> {
    let start = usize::try_from(offset).map_err(|_| DeviceFailure::CopyFailed)?;
    let end = start.checked_add(n).filter(|&e| e <= len).ok_or(DeviceFailure::CopyFailed)?;
    Ok(start..end)
}

/// Host-memory objects: the default backend.
#[derive(Debug)]
pub struct CpuBridge {
    generation: WorkerGeneration,
    next: u64,
    objects: HashMap<u64, Vec<u8>>,
    /// Largest total bytes of live objects; allocations beyond it fail.
    limit: u64,
    used: u64,
    /// Freed buffers kept for reuse by an allocation of the same size (no zeroing, no
    /// page faults on the hot path).
    pool: Vec<Vec<u8>>,
    pooled: u64,
}

/// Bytes of freed buffers a [`CpuBridge`] keeps for reuse.
pub const CPU_POOL_BYTES: u64 = 256 << 20;

impl CpuBridge {
    /// A bridge for `generation` with at most `limit` bytes of live objects.
    pub fn new(generation: WorkerGeneration, limit: u64) -> CpuBridge {
        CpuBridge {
            generation,
            next: 1,
            objects: HashMap::new(),
            limit,
            used: 0,
            pool: Vec::new(),
            pooled: 0,
        }
    }

    fn check(&self, handle: DeviceHandle) -> Result<(), DeviceFailure> {
        if handle.generation != self.generation {
            return Err(DeviceFailure::StaleHandle);
        }
        if !self.objects.contains_key(&handle.id) {
            return Err(DeviceFailure::UnknownHandle);
        }
        Ok(())
    }
}

impl DeviceBridge for CpuBridge {
    fn generation(&self) -> WorkerGeneration {
        self.generation
    }

    fn alloc(&mut self, bytes: u64) -> Result<DeviceHandle, DeviceFailure> {
        let fits = self.used.checked_add(bytes).is_some_and(|u| u <= self.limit);
        let len = usize::try_from(bytes).map_err(|_| DeviceFailure::AllocationFailed)?;
        if !fits {
            return Err(DeviceFailure::AllocationFailed);
        }
        let buf = match self.pool.iter().position(|b| b.len() == len) {
            Some(i) => {
                self.pooled -= bytes;
                self.pool.swap_remove(i)
            }
            None => {
                let mut buf = Vec::new();
                buf.try_reserve_exact(len).map_err(|_| DeviceFailure::AllocationFailed)?;
                buf.resize(len, 0);
                buf
            }
        };
        let id = self.next;
        self.next += 1;
        self.objects.insert(id, buf);
        self.used += bytes;
        Ok(DeviceHandle { generation: self.generation, id })
    }

    fn free(&mut self, handle: DeviceHandle) -> Result<(), DeviceFailure> {
        self.check(handle)?;
        if let Some(buf) = self.objects.remove(&handle.id) {
            let bytes = buf.len() as u64;
            self.used -= bytes;
            if self.pooled + bytes <= CPU_POOL_BYTES {
                self.pooled += bytes;
                self.pool.push(buf);
            }
        }
        Ok(())
    }

    fn host_to_device(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        src: &[u8],
    ) -> Result<(), DeviceFailure> {
        self.check(handle)?;
        let buf = self.objects.get_mut(&handle.id).ok_or(DeviceFailure::UnknownHandle)?;
        let span = copy_range(buf.len(), offset, src.len())?;
        buf[span].copy_from_slice(src);
        Ok(())
    }

    fn device_to_host(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), DeviceFailure> {
        self.check(handle)?;
        let buf = self.objects.get(&handle.id).ok_or(DeviceFailure::UnknownHandle)?;
        let span = copy_range(buf.len(), offset, dst.len())?;
        dst.copy_from_slice(&buf[span]);
        Ok(())
    }

    fn view(&self, handle: DeviceHandle) -> Result<&[u8], DeviceFailure> {
        self.check(handle)?;
        self.objects.get(&handle.id).map(Vec::as_slice).ok_or(DeviceFailure::UnknownHandle)
    }

    fn host_copy(
        &mut self,
        handle: DeviceHandle,
    ) -> Result<std::borrow::Cow<'_, [u8]>, DeviceFailure> {
        self.view(handle).map(std::borrow::Cow::Borrowed)
    }

    fn size(&self, handle: DeviceHandle) -> Result<u64, DeviceFailure> {
        self.view(handle).map(|b| b.len() as u64)
    }

    fn live(&self) -> usize {
        self.objects.len()
    }
}

/// Wraps a bridge and fails the n-th allocation or copy (and every later one): the
/// fault-injection backend for tests.
#[derive(Debug)]
pub struct FaultyBridge<B> {
    inner: B,
    fail_alloc_at: Option<u64>,
    fail_copy_at: Option<u64>,
    allocs: u64,
    copies: u64,
}

impl<B: DeviceBridge> FaultyBridge<B> {
    /// Wraps `inner`; `None` never fails that operation.
    pub fn new(inner: B, fail_alloc_at: Option<u64>, fail_copy_at: Option<u64>) -> FaultyBridge<B> {
        FaultyBridge { inner, fail_alloc_at, fail_copy_at, allocs: 0, copies: 0 }
    }

    fn copy_fault(&mut self) -> Result<(), DeviceFailure> {
        self.copies += 1;
        match self.fail_copy_at {
            Some(n) if self.copies >= n => Err(DeviceFailure::CopyFailed),
            _ => Ok(()),
        }
    }
}

impl<B: DeviceBridge> DeviceBridge for FaultyBridge<B> {
    fn generation(&self) -> WorkerGeneration {
        self.inner.generation()
    }
    fn alloc(&mut self, bytes: u64) -> Result<DeviceHandle, DeviceFailure> {
        self.allocs += 1;
        match self.fail_alloc_at {
            Some(n) if self.allocs >= n => Err(DeviceFailure::AllocationFailed),
            _ => self.inner.alloc(bytes),
        }
    }
    fn free(&mut self, handle: DeviceHandle) -> Result<(), DeviceFailure> {
        self.inner.free(handle)
    }
    fn host_to_device(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        src: &[u8],
    ) -> Result<(), DeviceFailure> {
        self.copy_fault()?;
        self.inner.host_to_device(handle, offset, src)
    }
    fn device_to_host(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), DeviceFailure> {
        self.copy_fault()?;
        self.inner.device_to_host(handle, offset, dst)
    }
    fn view(&self, handle: DeviceHandle) -> Result<&[u8], DeviceFailure> {
        self.inner.view(handle)
    }
    fn host_copy(
        &mut self,
        handle: DeviceHandle,
    ) -> Result<std::borrow::Cow<'_, [u8]>, DeviceFailure> {
        self.inner.host_copy(handle)
    }
    fn size(&self, handle: DeviceHandle) -> Result<u64, DeviceFailure> {
        self.inner.size(handle)
    }
    fn live(&self) -> usize {
        self.inner.live()
    }
}
