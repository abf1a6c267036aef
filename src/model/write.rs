//! Writing a GGUF file (version 2, 32-byte alignment: the layout candle's writer, used
//! before, gave synthesized and re-quantized models, so the same model gives the same
//! bytes).

use std::io::Write;

use super::gguf::{GgmlType, MetaValue};

/// One tensor to write: its type, shape (outermost first) and data in its block layout.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorData {
    /// The GGML type of the data.
    pub dtype: GgmlType,
    /// Its dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// The alignment of the tensor data and of each tensor.
const ALIGNMENT: usize = 32;

fn padding(len: usize) -> usize {
    (ALIGNMENT - len % ALIGNMENT) % ALIGNMENT
}

/// Writes `metadata` and `tensors`, in the order given, as a GGUF file to `w`. An array
/// whose elements are of different types is refused (`InvalidData`).
pub fn write_gguf(
    w: &mut impl Write,
    metadata: &[(&str, &MetaValue)],
    tensors: &[(&str, &TensorData)],
) -> std::io::Result<()> {
    let mut out = Counting { inner: w, pos: 0 };
    out.put(b"GGUF")?;
    out.put(&2u32.to_le_bytes())?;
    out.put(&(tensors.len() as u64).to_le_bytes())?;
    out.put(&(metadata.len() as u64).to_le_bytes())?;
    for (key, value) in metadata {
        out.string(key)?;
        out.put(&value.type_id().to_le_bytes())?;
        out.value(value)?;
    }
    let mut offset = 0usize;
    for (name, tensor) in tensors {
        out.string(name)?;
        out.put(&(tensor.shape.len() as u32).to_le_bytes())?;
        for &dim in tensor.shape.iter().rev() {
            out.put(&(dim as u64).to_le_bytes())?;
        }
        out.put(&tensor.dtype.id().to_le_bytes())?;
        out.put(&(offset as u64).to_le_bytes())?;
        offset += tensor.data.len() + padding(tensor.data.len());
    }
    out.put(&vec![0u8; padding(out.pos)])?;
    for (_, tensor) in tensors {
        out.put(&tensor.data)?;
        out.put(&vec![0u8; padding(tensor.data.len())])?;
    }
    Ok(())
}

/// A writer that counts the bytes it has written.
struct Counting<'a, W: Write> {
    inner: &'a mut W,
    pos: usize,
}

impl<W: Write> Counting<'_, W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.pos += bytes.len();
        self.inner.write_all(bytes)
    }

    fn string(&mut self, s: &str) -> std::io::Result<()> {
        self.put(&(s.len() as u64).to_le_bytes())?;
        self.put(s.as_bytes())
    }

    fn value(&mut self, value: &MetaValue) -> std::io::Result<()> {
        match value {
            MetaValue::U8(v) => self.put(&v.to_le_bytes()),
            MetaValue::I8(v) => self.put(&v.to_le_bytes()),
            MetaValue::U16(v) => self.put(&v.to_le_bytes()),
            MetaValue::I16(v) => self.put(&v.to_le_bytes()),
            MetaValue::U32(v) => self.put(&v.to_le_bytes()),
            MetaValue::I32(v) => self.put(&v.to_le_bytes()),
            MetaValue::U64(v) => self.put(&v.to_le_bytes()),
            MetaValue::I64(v) => self.put(&v.to_le_bytes()),
            MetaValue::F32(v) => self.put(&v.to_le_bytes()),
            MetaValue::F64(v) => self.put(&v.to_le_bytes()),
            MetaValue::Bool(v) => self.put(&[u8::from(*v)]),
            MetaValue::String(v) => self.string(v),
            MetaValue::Array(items) => {
                // An empty array's element type does not matter; GGUF readers take u32.
                let ty = items.first().map_or(4, MetaValue::type_id);
                if items.iter().any(|v| v.type_id() != ty) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "an array's elements are of different types",
                    ));
                }
                self.put(&ty.to_le_bytes())?;
                self.put(&(items.len() as u64).to_le_bytes())?;
                items.iter().try_for_each(|v| self.value(v))
            }
        }
    }
}
