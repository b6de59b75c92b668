//! Temporary stand-in until the table-driven options module lands.
use crate::io::FlushMethod;

#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    pub page_size: usize,
    pub buffer_pool_size: u64,
    pub buffer_pool_instances: usize,
    pub old_blocks_pct: u32,
    pub old_blocks_time: u64,
    pub flush_method: FlushMethod,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            page_size: 16384,
            buffer_pool_size: 128 << 20,
            buffer_pool_instances: 1,
            old_blocks_pct: 37,
            old_blocks_time: 1000,
            flush_method: FlushMethod::Fsync,
        }
    }
}

impl Options {
    pub fn validate(&self) -> crate::Result<()> {
        Ok(())
    }
}
