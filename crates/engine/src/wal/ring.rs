//! ring: the files the log is written to now and their geometry, as one value an online
//! resize (resize.rs) replaces whole.

use super::layout::{Geometry, LogSet};
use crate::error::{Error, Result};
use crate::io::File;
use std::sync::Arc;

/// The files the log lives in and their geometry. An online resize replaces it whole (under
/// the log's mutex, with no flush in progress), so a flush uses one ring from start to end.
pub(crate) struct Ring {
    pub geom: Geometry,
    pub files: Vec<Arc<dyn File>>,
    pub set: LogSet,
    /// The set's generation (file headers): one more than the set it replaced.
    pub generation: u64,
}

impl Ring {
    pub fn file(&self, index: usize) -> Result<&Arc<dyn File>> {
        self.files
            .get(index)
            .ok_or_else(|| Error::Poisoned(format!("redo log: no log file {index}")))
    }
}
