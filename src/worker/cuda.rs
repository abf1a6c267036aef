//! The CUDA device bridge (feature `cuda`): objects are device buffers, copies go through
//! the context's default stream and are synchronized before returning, so a ring span may
//! be released (ingress) or is filled (egress) as soon as a copy call returns.
//!
//! The CUDA driver library is loaded at run time; a machine without one fails
//! initialization with `backend_unavailable`.

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream};

use super::device::{DeviceBridge, copy_range};
use super::protocol::DeviceHandle;
use crate::wire::WorkerGeneration;
use crate::wire::reason::DeviceFailure;

/// Device buffers on one NVIDIA GPU.
pub struct CudaBridge {
    generation: WorkerGeneration,
    stream: Arc<CudaStream>,
    next: u64,
    objects: HashMap<u64, CudaSlice<u8>>,
}

impl std::fmt::Debug for CudaBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBridge")
            .field("generation", &self.generation)
            .field("objects", &self.objects.len())
            .finish()
    }
}

impl CudaBridge {
    /// Opens device `ordinal`.
    pub fn new(generation: WorkerGeneration, ordinal: u32) -> Result<CudaBridge, String> {
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal as usize))
            .map_err(|_| "the CUDA driver library could not be loaded".to_string())?
            .map_err(|e| e.to_string())?;
        Ok(CudaBridge {
            generation,
            stream: ctx.default_stream(),
            next: 1,
            objects: HashMap::new(),
        })
    }

    fn object(&self, handle: DeviceHandle) -> Result<&CudaSlice<u8>, DeviceFailure> {
        if handle.generation != self.generation {
            return Err(DeviceFailure::StaleHandle);
        }
        self.objects.get(&handle.id).ok_or(DeviceFailure::UnknownHandle)
    }
}

impl DeviceBridge for CudaBridge {
    fn generation(&self) -> WorkerGeneration {
        self.generation
    }

    fn alloc(&mut self, bytes: u64) -> Result<DeviceHandle, DeviceFailure> {
        let len = usize::try_from(bytes).map_err(|_| DeviceFailure::AllocationFailed)?;
        let buf = self
            .stream
            .alloc_zeros::<u8>(len.max(1))
            .map_err(|_| DeviceFailure::AllocationFailed)?;
        let id = self.next;
        self.next += 1;
        self.objects.insert(id, buf);
        Ok(DeviceHandle { generation: self.generation, id })
    }

    fn free(&mut self, handle: DeviceHandle) -> Result<(), DeviceFailure> {
        self.object(handle)?;
        self.objects.remove(&handle.id);
        Ok(())
    }

    fn host_to_device(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        src: &[u8],
    ) -> Result<(), DeviceFailure> {
        self.object(handle)?;
        let stream = Arc::clone(&self.stream);
        let buf = self.objects.get_mut(&handle.id).ok_or(DeviceFailure::UnknownHandle)?;
        let range = copy_range(buf.len(), offset, src.len())?;
        let mut view = buf.slice_mut(range);
        stream.memcpy_htod(src, &mut view).map_err(|_| DeviceFailure::CopyFailed)?;
        stream.synchronize().map_err(|_| DeviceFailure::CopyFailed)
    }

    fn device_to_host(
        &mut self,
        handle: DeviceHandle,
        offset: u64,
        dst: &mut [u8],
    ) -> Result<(), DeviceFailure> {
        let buf = self.object(handle)?;
        let range = copy_range(buf.len(), offset, dst.len())?;
        let view = buf.slice(range);
        self.stream.memcpy_dtoh(&view, dst).map_err(|_| DeviceFailure::CopyFailed)?;
        self.stream.synchronize().map_err(|_| DeviceFailure::CopyFailed)
    }

    fn view(&self, handle: DeviceHandle) -> Result<&[u8], DeviceFailure> {
        self.object(handle)?;
        Err(DeviceFailure::CopyFailed)
    }

    fn size(&self, handle: DeviceHandle) -> Result<u64, DeviceFailure> {
        self.object(handle).map(|b| b.len() as u64)
    }

    fn live(&self) -> usize {
        self.objects.len()
    }
}
