//! acklog: the file through which a torture child tells its parent what it acknowledged.
//!
//! One text line per event, `TAG field field ...`: `R` once the workload is ready to run, and
//! per workload an intent line before a transaction starts and an acknowledgement line after its
//! `commit()` returned. Lines are written whole, by one `write_all` of the line and its newline
//! under a mutex, so lines of different threads never interleave. A line the kill cut short (no
//! newline) was never acknowledged and is dropped by [`read_lines`].

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// The tag of the line a child writes once it is ready to be killed.
pub const READY: &str = "R";

/// The writer side, shared by a child's threads.
pub struct AckLog {
    file: Mutex<File>,
}

impl AckLog {
    /// Creates (or truncates) the ack file.
    pub fn create(path: &Path) -> std::io::Result<AckLog> {
        Ok(AckLog {
            file: Mutex::new(File::create(path)?),
        })
    }

    /// Appends one line.
    ///
    /// IMPORTANT: a plain `write()` is enough, no fsync: the torture kills the process, not the
    /// machine, and the kernel keeps a written page in its cache after the writer is gone, so a
    /// line whose write returned is in the file when the parent reads it. A caller acknowledges
    /// a commit only after `commit()` returned, and the parent counts only lines that reached
    /// the file, so an ack the kill prevented is simply an unacknowledged (in-flight) commit.
    pub fn line(&self, text: &str) -> std::io::Result<()> {
        let mut buf = String::with_capacity(text.len() + 1);
        buf.push_str(text);
        buf.push('\n');
        let mut f = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.write_all(buf.as_bytes())
    }
}

/// The complete lines of an ack file, in the order written (a missing file has none).
pub fn read_lines(path: &Path) -> std::io::Result<Vec<String>> {
    let text = match std::fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let complete = &text[..text.rfind('\n').map_or(0, |p| p + 1)];
    Ok(complete.lines().map(str::to_string).collect())
}

/// Appends `text` (whole lines) to an ack file, as a planted failure does.
pub fn append(path: &Path, text: &str) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().append(true).open(path)?;
    f.write_all(text.as_bytes())
}

/// Splits a line into its tag and numeric fields; `None` when a field is not a number.
pub fn numbers(line: &str) -> Option<(&str, Vec<u64>)> {
    let mut parts = line.split_ascii_whitespace();
    let tag = parts.next()?;
    let fields = parts
        .map(|p| p.parse().ok())
        .collect::<Option<Vec<u64>>>()?;
    Some((tag, fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_last_line_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ack");
        let log = AckLog::create(&p).unwrap();
        log.line("A 1 2").unwrap();
        append(&p, "A 3").unwrap();
        assert_eq!(read_lines(&p).unwrap(), vec!["A 1 2".to_string()]);
        append(&p, " 4\n").unwrap();
        assert_eq!(read_lines(&p).unwrap().len(), 2);
        assert_eq!(numbers("A 3 4"), Some(("A", vec![3, 4])));
        assert_eq!(numbers("A x"), None);
    }
}
