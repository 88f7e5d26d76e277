//! Rows the relay gives the gateway instead of its driver. While the
//! gateway holds a [`RowTap`] for a connection, the relay sends the row
//! packets of each text result set on it, as the server's bytes, and
//! then [`Tapped::End`]; the driver gets the column count, the
//! definitions and the packet that ends the result (an OK or EOF, or an
//! ERR mid-result), so its result set is empty, with the right ending,
//! and the gateway reads the rows from the packets themselves
//! (`text_rows`): no copy through the driver's socket and no value per
//! cell.
//!
//! The channel holds two chunks of at most a relay read (128 KiB): the
//! relay stops reading the backend while the gateway has not taken them,
//! as it would stop while the driver had not read its socket.

use std::sync::{Arc, Weak};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::relay::{Kept, Slot};

/// Chunks the channel holds.
const CHUNKS: usize = 2;

/// What the relay sends on a tap.
#[derive(Debug)]
pub enum Tapped {
    /// Row packets (headers included), cut anywhere.
    Rows(Bytes),
    /// The result set's rows ended; its ending goes to the driver.
    End,
}

/// The gateway's claim on the rows of a connection's text result sets,
/// for one statement; given up when dropped.
pub struct RowTap {
    rx: mpsc::Receiver<Tapped>,
    /// Weak: the relay drops the connection's records (and its end of the
    /// channel) when the connection ends, which ends the channel.
    slot: Weak<std::sync::Mutex<Kept>>,
}

impl RowTap {
    /// Claims the rows of `slot`'s next text result sets.
    pub(super) fn claim(slot: &Slot) -> Self {
        let (tx, rx) = mpsc::channel(CHUNKS);
        slot.lock().expect("not poisoned").tap = Some(tx);
        Self {
            rx,
            slot: Arc::downgrade(slot),
        }
    }

    /// What the relay sent next; `None` when the connection has ended
    /// (the driver then finds its socket closed).
    pub async fn recv(&mut self) -> Option<Tapped> {
        self.rx.recv().await
    }
}

impl Drop for RowTap {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.upgrade() {
            slot.lock().expect("not poisoned").tap = None;
        }
    }
}
