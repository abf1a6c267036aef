//! Control frames over an async stream (a mechanism): the codec in the parent module is
//! pure; this reads and writes its frames with tokio.

use super::{ControlMessage, FrameDecoder, encode};
use crate::wire::reason::ControlFault;

/// Writes one message as a frame on an async writer.
pub async fn write_message<W: tokio::io::AsyncWrite + Unpin>(
    w: &mut W,
    msg: &ControlMessage,
) -> Result<(), ControlFault> {
    use tokio::io::AsyncWriteExt;
    let frame = encode(msg)?;
    w.write_all(&frame).await.map_err(|_| ControlFault::ConnectionLost)?;
    w.flush().await.map_err(|_| ControlFault::ConnectionLost)
}

/// Reads the next message from an async reader (`None` at a clean end of stream).
pub async fn read_message<R: tokio::io::AsyncRead + Unpin>(
    r: &mut R,
    decoder: &mut FrameDecoder,
) -> Option<Result<ControlMessage, ControlFault>> {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 8192];
    loop {
        if let Some(m) = decoder.next_message() {
            return Some(m);
        }
        match r.read(&mut buf).await {
            Ok(0) => return None,
            Ok(n) => decoder.push(&buf[..n]),
            Err(_) => return Some(Err(ControlFault::ConnectionLost)),
        }
    }
}
