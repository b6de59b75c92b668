//! Several positioned writes in one system call, through io_uring (Linux): the page cleaner's
//! in-place writes of one batch go to the kernel a few at a time, each few waited for once and
//! reaching the device as one plugged batch (one notification of a virtio disk instead of one
//! per write).
//! One write at a time, each its own `pwrite`, sleeps and wakes the writer once per page and
//! notifies the device once per page; on a virtual machine each notification is an exit to
//! the hypervisor.
//!
//! Only [`DiskFile`](super::file::DiskFile)'s O_DIRECT writes come here. Where a ring cannot be
//! set up (a kernel without io_uring, a seccomp filter that refuses it, `io_uring_disabled`) or
//! the kernel refuses the write operation, the writes go through the caller's one-at-a-time
//! path instead, so behaviour is the same everywhere and only the cost differs.
//!
//! Each thread has its own ring (a page cleaner's writer threads submit independently),
//! created at its first batch. Never: return while a write submitted here may still be in
//! flight (the kernel reads the caller's buffers until it completes).

use io_uring::{opcode, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Entries of each thread's ring: the most writes one submission carries, and so the most a
/// thread has in flight. Kept small on purpose: a log fsync issued while page writes are in
/// flight waits for them (the device's cache flush covers every write before it), so deep
/// submissions (64) slowed the log's group commits and cost TPC-C throughput, while 4 kept
/// most of the saving in system calls, wakeups and device notifications (docs/measurements.md).
const RING_ENTRIES: usize = 4;

/// How long a failing ring is retried while writes it accepted are still in flight, before the
/// process is stopped (see `submit_chunk`).
const IN_FLIGHT_GIVE_UP: Duration = Duration::from_secs(10);

enum Ring {
    Untried,
    Unavailable,
    Ready(Box<IoUring>),
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
}

/// Writes all of every `(buffer, offset)` of `writes` to `fd`, in any order. What the ring
/// cannot do (no ring on this thread, an operation the kernel refuses, the rest of a short
/// write) is done by `one` (a blocking write of all of a buffer at an offset). Returns the
/// first error; when it returns, no write of `writes` is in flight.
pub(crate) fn write_all(
    fd: RawFd,
    writes: &[(&[u8], u64)],
    one: &dyn Fn(&[u8], u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut left: Vec<(&[u8], u64)> = Vec::new();
    let result = RING.with(|cell| {
        let mut ring = cell.borrow_mut();
        if matches!(*ring, Ring::Untried) {
            *ring = match IoUring::new(RING_ENTRIES as u32) {
                Ok(r) => Ring::Ready(Box::new(r)),
                Err(e) => {
                    tracing::info!("io_uring unavailable ({e}): page writes go one at a time");
                    Ring::Unavailable
                }
            };
        }
        let Ring::Ready(r) = &mut *ring else {
            left.extend_from_slice(writes);
            return Ok(());
        };
        let mut first_err = None;
        let mut refused = false;
        let mut chunks = writes.chunks(RING_ENTRIES);
        for chunk in chunks.by_ref() {
            let done = submit_chunk(r, fd, chunk, &mut left);
            refused |= done.drop_ring;
            if let Some(e) = done.err {
                first_err = Some(e);
            }
            if refused || first_err.is_some() {
                break;
            }
        }
        if refused {
            // The kernel refused the ring or the operation: stop asking. Dropping the ring
            // also discards any entry it never submitted.
            *ring = Ring::Unavailable;
            for chunk in chunks {
                left.extend_from_slice(chunk);
            }
        }
        first_err.map_or(Ok(()), Err)
    });
    result?;
    for (buf, offset) in left {
        one(buf, offset)?;
    }
    Ok(())
}

/// How a chunk ended. Nothing of it is in flight any more.
struct ChunkEnd {
    /// The first write that failed.
    err: Option<io::Error>,
    /// The kernel refused the operation (EINVAL, EOPNOTSUPP), or the ring failed with nothing
    /// in flight: the writes not done are in `left`, and the ring must be dropped, unused (it
    /// may still hold entries it never submitted).
    drop_ring: bool,
}

/// Submits the writes of `chunk` (at most the ring's entries) and waits for all of them. A
/// short write's rest and a refused write go to `left`; the first failed write is the error.
fn submit_chunk<'b>(
    ring: &mut IoUring,
    fd: RawFd,
    chunk: &[(&'b [u8], u64)],
    left: &mut Vec<(&'b [u8], u64)>,
) -> ChunkEnd {
    debug_assert!(chunk.len() <= RING_ENTRIES);
    {
        let mut sq = ring.submission();
        for (i, (buf, offset)) in chunk.iter().enumerate() {
            let len = u32::try_from(buf.len()).expect("one write is under 4 GiB");
            let entry = opcode::Write::new(types::Fd(fd), buf.as_ptr(), len)
                .offset(*offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the entry points into `buf`, which `chunk` borrows for longer than this
            // call, and nothing writes to it meanwhile (shared borrow). This function returns
            // only once every entry pushed here has completed (the loop below reaps one
            // completion per entry) or was never submitted (then the ring is dropped, which
            // discards it), so the kernel never reads `buf` after the borrow ends.
            // The queue has room: it holds RING_ENTRIES and every earlier call left it empty.
            unsafe { sq.push(&entry) }.expect("an empty submission queue has room for a chunk");
        }
    }
    let n = chunk.len();
    let (mut submitted, mut done) = (0usize, 0usize);
    let mut first_err = None;
    let mut refused = false;
    let mut failing_since: Option<Instant> = None;
    while done < n {
        match ring.submit_and_wait(n - done) {
            Ok(k) => {
                submitted += k;
                failing_since = None;
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => {
                if submitted == done {
                    // Nothing in flight. Entries are submitted in queue order, so those from
                    // `submitted` on never ran; the caller drops this ring (which discards
                    // them) and writes them itself.
                    left.extend_from_slice(&chunk[submitted..]);
                    return ChunkEnd {
                        err: first_err,
                        drop_ring: true,
                    };
                }
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > IN_FLIGHT_GIVE_UP {
                    // Returning would let the kernel read buffers the caller frees.
                    eprintln!(
                        "evenkeel: io_uring failed with writes in flight and did not recover \
                         in {IN_FLIGHT_GIVE_UP:?} ({e}); stopping the process"
                    );
                    std::process::abort();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        for cqe in ring.completion() {
            done += 1;
            let i = cqe.user_data() as usize;
            let (buf, offset) = chunk[i];
            let res = cqe.result();
            if res < 0 {
                let errno = -res;
                if errno == libc::EINVAL || errno == libc::EOPNOTSUPP {
                    refused = true;
                    left.push((buf, offset));
                } else {
                    first_err.get_or_insert(io::Error::from_raw_os_error(errno));
                }
            } else if (res as usize) < buf.len() {
                let written = res as usize;
                left.push((&buf[written..], offset + written as u64));
            }
        }
    }
    ChunkEnd {
        err: first_err,
        drop_ring: refused,
    }
}

fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR) | Some(libc::EAGAIN) | Some(libc::EBUSY)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    #[test]
    fn writes_land_at_their_offsets_whatever_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        // 150 writes: many submissions of the ring, some out of order, one far out
        let bufs: Vec<Vec<u8>> = (0..150u32).map(|i| vec![(i % 251) as u8; 4096]).collect();
        let mut writes: Vec<(&[u8], u64)> = bufs
            .iter()
            .enumerate()
            .map(|(i, b)| (&b[..], (i as u64) * 4096))
            .collect();
        writes.swap(3, 97);
        writes.swap(10, 140);
        let far = vec![7u8; 100];
        writes.push((&far[..], 1 << 20));
        let ones = std::cell::Cell::new(0);
        write_all(f.as_raw_fd(), &writes, &|b, o| {
            ones.set(ones.get() + 1);
            f.write_all_at(b, o)
        })
        .unwrap();
        let mut got = vec![0u8; 4096];
        for (i, b) in bufs.iter().enumerate() {
            f.read_exact_at(&mut got, i as u64 * 4096).unwrap();
            assert_eq!(&got, b, "write {i}");
        }
        let mut tail = vec![0u8; 100];
        f.read_exact_at(&mut tail, 1 << 20).unwrap();
        assert_eq!(tail, far);
        // where the ring works nothing went one at a time; where it does not, everything did
        let ring_ready = RING.with(|c| matches!(*c.borrow(), Ring::Ready(_)));
        assert_eq!(ones.get(), if ring_ready { 0 } else { writes.len() });
    }

    #[test]
    fn a_failed_write_is_returned_and_nothing_stays_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro");
        std::fs::write(&path, b"x").unwrap();
        // a read-only descriptor: every write fails with EBADF, through either path
        let f = std::fs::File::open(&path).unwrap();
        let buf = vec![1u8; 4096];
        let writes = [(&buf[..], 0u64), (&buf[..], 4096)];
        let err = write_all(f.as_raw_fd(), &writes, &|b, o| f.write_all_at(b, o)).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EBADF), "{err}");
        // the ring is usable afterwards
        let g = tempfile::tempfile().unwrap();
        write_all(g.as_raw_fd(), &writes, &|b, o| g.write_all_at(b, o)).unwrap();
        let mut got = vec![0u8; 4096];
        g.read_exact_at(&mut got, 4096).unwrap();
        assert_eq!(got, buf);
    }
}
