//! Process and device counters from Linux's /proc: CPU time (utime + stime of /proc/self/stat,
//! in USER_HZ = 100 ticks per second), RSS (VmRSS of /proc/self/status), bytes that reached the
//! storage layer (read_bytes, write_bytes of /proc/self/io) — summed with the same counters of
//! a peer engine's server process when the driver names one — the reads, writes and sectors
//! of the device holding the data directory (/proc/diskstats), and what the whole machine does:
//! its 1-minute load average (/proc/loadavg) and the CPU time all processes used (the busy
//! fields of /proc/stat's `cpu` line, same ticks), from which the sampler takes this process's
//! share to show what its neighbours used. Parsers take the file text, so they are tested on
//! fixed strings; a missing or odd file gives `None`, never a panic.

use std::path::Path;

/// Sectors in /proc/diskstats are always 512 bytes.
const SECTOR_BYTES: u64 = 512;
/// USER_HZ, the unit of /proc/self/stat times on every Linux architecture we run on.
const TICKS_PER_S: f64 = 100.0;

/// Cumulative counters of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcCounters {
    pub cpu_s: f64,
    pub rss_bytes: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
}

/// What the whole machine did: load average and CPU time used by every process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineCounters {
    /// The 1-minute load average (runnable plus uninterruptible tasks, decayed).
    pub load_avg_1m: f64,
    /// CPU seconds all CPUs spent busy (not idle, not waiting for I/O) since boot, steal
    /// included.
    pub busy_cpu_s: f64,
    /// CPU seconds the hypervisor ran something else while this machine's CPUs had work
    /// (steal), since boot: 0 on bare metal.
    pub steal_cpu_s: f64,
}

/// Cumulative counters of a block device (or a sum of devices).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// Milliseconds requests spent at the device (queued or in service), summed over requests:
    /// /proc/diskstats' weighted time.
    pub weighted_ms: u64,
}

/// utime + stime in seconds from /proc/self/stat text.
pub fn parse_stat_cpu_s(text: &str) -> Option<f64> {
    // The command name may contain spaces; fields are counted after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')' the first field is field 3 (state); utime is field 14, stime field 15.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_S)
}

/// VmRSS in bytes from /proc/self/status text.
pub fn parse_status_rss(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// (read_bytes, write_bytes) from /proc/self/io text.
pub fn parse_io(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((field("read_bytes:")?, field("write_bytes:")?))
}

/// The 1-minute load average from /proc/loadavg text.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Busy CPU seconds of all CPUs from /proc/stat text: user, nice, system, irq, softirq and
/// steal of the `cpu` line (idle and iowait left out; guest time is already inside user);
/// and the steal seconds among them.
pub fn parse_stat_busy_steal_s(text: &str) -> Option<(f64, f64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let busy = [0usize, 1, 2, 5, 6, 7]
        .iter()
        .map(|&i| f.get(i).copied().unwrap_or(0))
        .sum::<u64>();
    let steal = f.get(7).copied().unwrap_or(0);
    (f.len() >= 4).then_some((busy as f64 / TICKS_PER_S, steal as f64 / TICKS_PER_S))
}

/// Counters of the devices selected by `pick(major, minor, name)` from /proc/diskstats text.
pub fn parse_diskstats(text: &str, pick: &dyn Fn(u64, u64, &str) -> bool) -> Option<DiskCounters> {
    let mut sum = DiskCounters::default();
    let mut found = false;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 10 {
            continue;
        }
        let (Ok(major), Ok(minor)) = (f[0].parse::<u64>(), f[1].parse::<u64>()) else {
            continue;
        };
        if !pick(major, minor, f[2]) {
            continue;
        }
        let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        sum.reads += n(3);
        sum.read_bytes += n(5) * SECTOR_BYTES;
        sum.writes += n(7);
        sum.write_bytes += n(9) * SECTOR_BYTES;
        sum.weighted_ms += n(13);
        found = true;
    }
    found.then_some(sum)
}

/// Reads the counters of this process and of the data directory's device.
pub struct ProcReader {
    /// (major, minor) of the data directory's device, when it is a real block device.
    dev: Option<(u64, u64)>,
    /// A server process whose counters are added to this process's.
    server_pid: Option<u32>,
}

impl ProcReader {
    pub fn new(data_dir: Option<&Path>) -> Self {
        let dev = data_dir.and_then(device_of);
        ProcReader {
            dev,
            server_pid: None,
        }
    }

    /// Also count the process `pid` (a peer engine's server).
    pub fn with_server(mut self, pid: Option<u32>) -> Self {
        self.server_pid = pid;
        self
    }

    /// This process's counters plus the server's (a server that has exited counts zero).
    pub fn process(&self) -> ProcCounters {
        let mut c = counters_of("self");
        if let Some(pid) = self.server_pid {
            let s = counters_of(&pid.to_string());
            c.cpu_s += s.cpu_s;
            c.rss_bytes += s.rss_bytes;
            c.read_bytes += s.read_bytes;
            c.write_bytes += s.write_bytes;
        }
        c
    }

    /// The machine's load average and busy CPU time; `None` where /proc is not readable.
    pub fn machine(&self) -> Option<MachineCounters> {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let (busy_cpu_s, steal_cpu_s) = parse_stat_busy_steal_s(&read("/proc/stat")?)?;
        Some(MachineCounters {
            load_avg_1m: parse_loadavg(&read("/proc/loadavg")?)?,
            busy_cpu_s,
            steal_cpu_s,
        })
    }

    /// The data directory's device if it is listed, else the sum of whole physical disks.
    pub fn disk(&self) -> Option<DiskCounters> {
        let text = std::fs::read_to_string("/proc/diskstats").ok()?;
        if let Some((ma, mi)) = self.dev {
            if let Some(c) = parse_diskstats(&text, &|a, b, _| a == ma && b == mi) {
                return Some(c);
            }
        }
        let disks = whole_disks();
        parse_diskstats(&text, &|_, _, name| disks.iter().any(|d| d == name))
    }
}

/// The counters of /proc/`which` ("self" or a pid).
fn counters_of(which: &str) -> ProcCounters {
    let read = |f: &str| std::fs::read_to_string(format!("/proc/{which}/{f}")).unwrap_or_default();
    let (read_bytes, write_bytes) = parse_io(&read("io")).unwrap_or((0, 0));
    ProcCounters {
        cpu_s: parse_stat_cpu_s(&read("stat")).unwrap_or(0.0),
        rss_bytes: parse_status_rss(&read("status")).unwrap_or(0),
        read_bytes,
        write_bytes,
    }
}

/// Block devices that are whole physical disks (not loop, ram, zram or device-mapper).
fn whole_disks() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !["loop", "ram", "zram", "dm-", "sr"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .collect()
}

/// (major, minor) of the filesystem holding `p`.
fn device_of(p: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(p).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    Some((major, minor))
}

/// Total size of the files under `p` (0 if it cannot be read).
pub fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_size(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat =
            "1234 (my prog) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 50 0 0 20 0 4 0 100 1000 200";
        assert_eq!(parse_stat_cpu_s(stat), Some(3.0));
        assert_eq!(
            parse_status_rss("Name:\tx\nVmRSS:\t  2048 kB\n"),
            Some(2 * 1024 * 1024)
        );
        let io = "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io(io), Some((4096, 8192)));
        let ds = "   8       0 sda 100 0 800 0 50 0 400 0 0 0 70\n   8       1 sda1 90 0 700 0 40 0 300 0 0 0 60\n";
        let c = parse_diskstats(ds, &|_, _, n| n == "sda").expect("sda");
        assert_eq!(
            c,
            DiskCounters {
                reads: 100,
                read_bytes: 800 * 512,
                writes: 50,
                write_bytes: 400 * 512,
                weighted_ms: 70,
            }
        );
        assert!(parse_diskstats(ds, &|_, _, n| n == "nvme0n1").is_none());
        assert!(parse_stat_cpu_s("garbage").is_none());
        assert_eq!(parse_loadavg("1.70 0.75 0.30 4/106 7480\n"), Some(1.7));
        assert!(parse_loadavg("").is_none());
        let stat = "cpu  1000 50 200 9000 300 10 20 30 0 0\ncpu0 500 25 100 4500 150 5 10 15 0 0\n";
        // user + nice + system + irq + softirq + steal = 1310 ticks.
        assert_eq!(parse_stat_busy_steal_s(stat).map(|b| b.0), Some(13.1));
        assert_eq!(parse_stat_busy_steal_s(stat), Some((13.1, 0.3)));
        assert!(parse_stat_busy_steal_s("intr 1 2 3\n").is_none());
    }

    #[test]
    fn reads_this_process() {
        let p = ProcReader::new(None).process();
        assert!(p.rss_bytes > 0);
        // A "server" that is this very process counts twice.
        let both = ProcReader::new(None)
            .with_server(Some(std::process::id()))
            .process();
        assert!(both.rss_bytes > p.rss_bytes);
        let m = ProcReader::new(None)
            .machine()
            .expect("/proc/stat and /proc/loadavg");
        assert!(m.busy_cpu_s > 0.0 && m.load_avg_1m >= 0.0);
    }
}
