//! The background flusher and shutdown: a thread that writes and fsyncs the log about once per
//! `background_interval` (what makes `FlushAtCommit::Zero` and `Two` durable "about a second
//! late", as InnoDB's master thread does), and `close`/`Drop`, which stop it and make everything
//! appended durable.
//!
//! What must stay true: stopping never loses a group that was appended before `close` (close
//! flushes durably after the thread has stopped); the thread never outlives the handle's wish to
//! stop by more than one flush; a poisoned log stops the thread, it never retries.

use super::buffer::Failure;
use super::writer::{Log, Shared};
use crate::error::Result;
use crate::types::Lsn;
use std::sync::Arc;

impl Log {
    /// Starts the background flusher (idempotent). Appenders drain a full buffer themselves, so
    /// the thread only bounds how late a `Zero`/`Two` commit becomes durable.
    pub fn start_background(&self) -> Result<()> {
        let mut slot = self.background.lock();
        if slot.is_some() {
            return Ok(());
        }
        self.shared.state.lock().usable()?;
        *self.shared.bg_stop.lock() = false;
        let log = Log {
            shared: Arc::clone(&self.shared),
            background: parking_lot::Mutex::new(None),
            is_handle: false,
        };
        let handle = std::thread::Builder::new()
            .name("evenkeel-log".into())
            .spawn(move || log.background_loop())
            .map_err(|e| crate::error::Error::io("redo log background thread", "spawn", e))?;
        *slot = Some(handle);
        Ok(())
    }

    fn background_loop(&self) {
        let sh: &Shared = &self.shared;
        loop {
            {
                let mut stop = sh.bg_stop.lock();
                if !*stop {
                    sh.bg_wake.wait_for(&mut stop, sh.cfg.background_interval);
                }
                if *stop {
                    return;
                }
            }
            let current = self.current_lsn();
            if let Err(e) = self.flush_to(current, true) {
                tracing::error!("redo log background flush failed, flusher stops: {e}");
                return;
            }
        }
    }

    fn stop_background(&self) {
        let handle = self.background.lock().take();
        if let Some(h) = handle {
            *self.shared.bg_stop.lock() = true;
            self.shared.bg_wake.notify_all();
            if h.join().is_err() {
                tracing::error!("redo log background thread panicked");
            }
        }
    }

    /// Stops the background thread, writes and fsyncs everything appended, and refuses any
    /// later use with `Error::LogClosed`. Returns the flush's error if it fails.
    pub fn close(&self) -> Result<()> {
        self.stop_background();
        let current = self.current_lsn();
        let res = self.flush_to(Lsn(current.0), true);
        let mut st = self.shared.state.lock();
        if st.failure.is_none() {
            st.failure = Some(Failure::Closed);
        }
        self.shared.wake(&mut st);
        res
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        // The background thread holds its own `Log` over the same `Shared`; only the user's
        // handle closes the log.
        if !self.is_handle {
            return;
        }
        self.stop_background();
        if self.shared.state.lock().failure.is_some() {
            return;
        }
        if let Err(e) = self.close() {
            tracing::error!("redo log: flush at drop failed: {e}");
        }
    }
}
