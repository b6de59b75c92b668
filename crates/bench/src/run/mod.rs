//! Running a workload end to end: pick the data directory (a fresh temporary one without
//! `--dir`), open the engine, drive the clients while the main thread samples once a second,
//! then write the results directory and print the final figures. One module per workload;
//! this file holds what they share.

pub mod console;
pub mod defaults;
pub mod engine;
pub mod insert;
pub mod kv;
pub mod schedule;
pub mod sweep;
pub mod tpcc;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{BenchError, BenchResult};
use crate::report::summary::Summary;
use crate::sampler::SampleRow;
pub use engine::EngineSpec;

/// Options every workload takes.
#[derive(Debug, Clone, Default)]
pub struct CommonOptions {
    pub engine: EngineSpec,
    /// Data directory; a fresh temporary directory when `None`.
    pub dir: Option<PathBuf>,
    /// Results directory; `./evenkeel-results/<workload>-<timestamp>` when `None`.
    pub out: Option<PathBuf>,
    pub json: bool,
    pub quiet: bool,
    pub seed: u64,
    /// Option changes while running (`--at`), sorted by time.
    pub schedule: Vec<schedule::ScheduledSet>,
}

/// What a finished run leaves behind.
#[derive(Debug, Clone)]
pub struct RunOutput {
    pub summary: Summary,
    pub rows: Vec<SampleRow>,
    pub out_dir: PathBuf,
}

/// The data directory of a run, removed at the end when it was temporary.
pub struct DataDir {
    pub path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl DataDir {
    pub fn new(dir: Option<&Path>) -> BenchResult<DataDir> {
        match dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .map_err(|e| BenchError::io(format!("create {}", d.display()), e))?;
                Ok(DataDir {
                    path: d.to_path_buf(),
                    _temp: None,
                })
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("evenkeel-bench-")
                    .tempdir()
                    .map_err(|e| BenchError::io("create a temporary data directory", e))?;
                Ok(DataDir {
                    path: t.path().to_path_buf(),
                    _temp: Some(t),
                })
            }
        }
    }
}

/// Replace `dst` with a copy of the directory `src` (files and subdirectories). The engine
/// must be closed on `src`: a sweep copies its loaded template once per run this way.
///
/// The copy is on the device and out of the page cache before this returns (each file
/// fsynced, then its cached pages dropped; the directory fsynced), so every run starts cold
/// and from a quiet device. Why: a copy left dirty in the page cache is written back by the
/// kernel about 30 s later (`vm.dirty_expire_centisecs`), that is, during the run: a 0.6-1.2 GB
/// burst of writes that the device probe saw as stalls and that stalled the engine's log
/// fsyncs; and an O_DIRECT read or write of a range with dirty cached pages first writes them
/// back itself.
pub fn copy_dir(src: &Path, dst: &Path) -> BenchResult<()> {
    copy_tree(src, dst)?;
    sync_path(dst, false)
}

fn copy_tree(src: &Path, dst: &Path) -> BenchResult<()> {
    if dst.exists() {
        std::fs::remove_dir_all(dst)
            .map_err(|e| BenchError::io(format!("remove {}", dst.display()), e))?;
    }
    std::fs::create_dir_all(dst)
        .map_err(|e| BenchError::io(format!("create {}", dst.display()), e))?;
    let entries =
        std::fs::read_dir(src).map_err(|e| BenchError::io(format!("read {}", src.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| BenchError::io(format!("read {}", src.display()), e))?;
        let (from, to) = (entry.path(), dst.join(entry.file_name()));
        if from.is_dir() {
            copy_tree(&from, &to)?;
            sync_path(&to, false)?;
        } else {
            std::fs::copy(&from, &to).map_err(|e| {
                BenchError::io(format!("copy {} to {}", from.display(), to.display()), e)
            })?;
            sync_path(&to, true)?;
        }
    }
    Ok(())
}

/// fsync `path` (a file or a directory); for a file, then drop its pages from the page cache.
fn sync_path(path: &Path, drop_cache: bool) -> BenchResult<()> {
    let f = std::fs::File::open(path)
        .map_err(|e| BenchError::io(format!("open {} to sync it", path.display()), e))?;
    f.sync_all()
        .map_err(|e| BenchError::io(format!("fsync {}", path.display()), e))?;
    if drop_cache {
        drop_page_cache(&f);
    }
    Ok(())
}

/// Advise the kernel to drop the file's cached pages (they are clean: the file was just
/// fsynced). Advice only: an error or another platform leaves the pages cached.
#[cfg(target_os = "linux")]
fn drop_page_cache(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    #[allow(unsafe_code)]
    // SAFETY: posix_fadvise reads no memory of ours; it takes a file descriptor that `f` owns
    // and keeps open for the whole call, and plain integers (offset 0, length 0 = to the end).
    unsafe {
        libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

#[cfg(not(target_os = "linux"))]
fn drop_page_cache(_f: &std::fs::File) {}

/// Sleep until `start + n` seconds.
pub fn sleep_until_second(start: Instant, n: u64) {
    let at = start + Duration::from_secs(n);
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

/// Sleep until `start + n` seconds or until `done()` turns true (polled every 20 ms);
/// true when the second was reached.
pub fn wait_second(start: Instant, n: u64, done: &dyn Fn() -> bool) -> bool {
    let at = start + Duration::from_secs(n);
    loop {
        let now = Instant::now();
        if now >= at {
            return true;
        }
        if done() {
            return false;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(20)));
    }
}

/// The configuration shown in reports and hashed: workload parameters then engine settings.
pub fn config_map(
    workload: &[(&str, String)],
    engine: Vec<(String, String)>,
    spec: &EngineSpec,
) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = workload
        .iter()
        .map(|(k, v)| (format!("bench.{k}"), v.clone()))
        .collect();
    if let Some(c) = &spec.config {
        m.insert("bench.config_file".into(), c.display().to_string());
    }
    for (k, v) in engine {
        m.insert(format!("{}.{k}", spec.engine), v);
    }
    m
}

/// Positive-integer check with a message naming the argument.
pub fn require_positive(name: &str, v: u64) -> BenchResult<()> {
    if v == 0 {
        return Err(BenchError::Usage(format!("{name} must be at least 1")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_dir_replaces_the_destination_with_the_tree() {
        let t = tempfile::tempdir().unwrap();
        let (src, dst) = (t.path().join("src"), t.path().join("dst"));
        std::fs::create_dir_all(src.join("sub")).unwrap();
        std::fs::write(src.join("a.data"), vec![7u8; 70_000]).unwrap();
        std::fs::write(src.join("sub").join("b"), b"bee").unwrap();
        std::fs::create_dir_all(&dst).unwrap();
        std::fs::write(dst.join("stale"), b"old run").unwrap();
        copy_dir(&src, &dst).unwrap();
        assert_eq!(
            std::fs::read(dst.join("a.data")).unwrap(),
            vec![7u8; 70_000]
        );
        assert_eq!(std::fs::read(dst.join("sub").join("b")).unwrap(), b"bee");
        assert!(
            !dst.join("stale").exists(),
            "the old copy is replaced, not merged"
        );
        // the source is untouched
        assert_eq!(std::fs::read(src.join("sub").join("b")).unwrap(), b"bee");
    }

    #[test]
    fn copy_dir_names_a_missing_source() {
        let t = tempfile::tempdir().unwrap();
        let e = copy_dir(&t.path().join("nope"), &t.path().join("dst")).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }
}
