//! The workbench's own MariaDB server: one per data directory, under `<dir>/mariadb/`
//! (`data/` the datadir, `my.cnf`, `mariadbd.pid`, `error.log`, and the unix socket). It is
//! created with `mariadb-install-db` the first time, started as a child process with
//! `--defaults-file`, reached only over its socket (`skip-networking`), and stopped by a
//! `SHUTDOWN` statement then waiting for that child to exit (a SIGTERM to its pid when the
//! statement cannot be sent). A second run on the same directory reuses the data.
//!
//! Must never: start a second server on a datadir that has one (the pid file is checked: a
//! live `mariadbd` with that pid means refuse; a dead one means a stale pid file and socket,
//! removed); find, signal or stop a server by process name.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mysql::{Conn, OptsBuilder};
use parking_lot::Mutex;

use crate::error::{BenchError, BenchResult};

/// Debian's package that ships `mariadbd` and `mariadb-install-db`.
const PACKAGE: &str = "mariadb-server";
/// Written into the server directory once `mariadb-install-db` has finished.
const INSTALLED_MARKER: &str = "installed";
/// The longest unix socket path Linux accepts, less its terminating NUL.
const SOCKET_PATH_MAX: usize = 107;
/// How long a start may take (crash recovery of a big redo log included).
const START_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a clean shutdown may take (writing back a large dirty buffer pool).
const STOP_TIMEOUT: Duration = Duration::from_secs(900);
/// Lines of the error log shown when the server fails.
const LOG_TAIL_LINES: usize = 25;

/// The files of one server.
#[derive(Debug, Clone)]
pub struct ServerPaths {
    pub root: PathBuf,
    pub datadir: PathBuf,
    pub cnf: PathBuf,
    pub pid_file: PathBuf,
    pub error_log: PathBuf,
    pub tmpdir: PathBuf,
    pub socket: PathBuf,
}

impl ServerPaths {
    pub fn new(dir: &Path) -> BenchResult<ServerPaths> {
        let root = std::path::absolute(dir.join("mariadb"))
            .map_err(|e| BenchError::io(format!("resolve {}", dir.display()), e))?;
        let mut socket = root.join("mariadbd.sock");
        if socket.as_os_str().len() > SOCKET_PATH_MAX {
            // A deep --dir: the socket goes to the temporary directory under a name derived
            // from the datadir, so two directories never share one.
            let h = fnv1a(root.as_os_str().as_encoded_bytes());
            socket = std::env::temp_dir().join(format!("evenkeel-mariadbd-{h:016x}.sock"));
        }
        Ok(ServerPaths {
            datadir: root.join("data"),
            cnf: root.join("my.cnf"),
            pid_file: root.join("mariadbd.pid"),
            error_log: root.join("error.log"),
            tmpdir: root.join("tmp"),
            socket,
            root,
        })
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The two programs a server needs.
struct Binaries {
    mariadbd: PathBuf,
    install_db: PathBuf,
}

fn find_binary(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs: Vec<PathBuf> = std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"].map(PathBuf::from))
        .collect();
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

fn binaries() -> BenchResult<Binaries> {
    let missing = |what: &str| {
        BenchError::Usage(format!(
            "the innodb engine needs MariaDB's {what}, which was not found in PATH or /usr/sbin: \
             install Debian's {PACKAGE} package (apt-get install {PACKAGE})"
        ))
    };
    Ok(Binaries {
        mariadbd: find_binary(&["mariadbd", "mysqld"]).ok_or_else(|| missing("mariadbd"))?,
        install_db: find_binary(&["mariadb-install-db", "mysql_install_db"])
            .ok_or_else(|| missing("mariadb-install-db"))?,
    })
}

/// True when this process runs as root (mariadbd then needs `user = root` to start).
pub fn running_as_root() -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1))
        .is_some_and(|euid| euid == "0")
}

/// The last `n` lines of a file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A `mariadbd` with this pid is alive and runs with our defaults file.
fn live_server(pid: u32, cnf: &Path) -> bool {
    let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let text = String::from_utf8_lossy(&cmdline);
    (text.contains("mariadbd") || text.contains("mysqld")) && text.contains(&*cnf.to_string_lossy())
}

/// A running server this process started.
pub struct Server {
    pub paths: ServerPaths,
    child: Mutex<Option<Child>>,
    pid: u32,
}

impl Server {
    /// Write `cnf_text` as my.cnf, create the datadir if needed, and start the server; waits
    /// until it accepts connections.
    pub fn start(paths: ServerPaths, cnf_text: &str) -> BenchResult<Server> {
        let bins = binaries()?;
        fs::create_dir_all(&paths.tmpdir)
            .map_err(|e| BenchError::io(format!("create {}", paths.tmpdir.display()), e))?;
        clear_stale(&paths)?;
        fs::write(&paths.cnf, cnf_text)
            .map_err(|e| BenchError::io(format!("write {}", paths.cnf.display()), e))?;
        if !paths.root.join(INSTALLED_MARKER).exists() {
            install(&bins, &paths)?;
        }
        let stderr_path = paths.root.join("mariadbd.stderr");
        let stderr = File::create(&stderr_path)
            .map_err(|e| BenchError::io(format!("create {}", stderr_path.display()), e))?;
        let child = Command::new(&bins.mariadbd)
            .arg(format!("--defaults-file={}", paths.cnf.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| BenchError::io(format!("start {}", bins.mariadbd.display()), e))?;
        let server = Server {
            pid: child.id(),
            child: Mutex::new(Some(child)),
            paths,
        };
        server.wait_ready()?;
        Ok(server)
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A new connection over the socket (no database selected).
    pub fn connect(&self) -> mysql::Result<Conn> {
        let opts = OptsBuilder::new()
            .socket(Some(self.paths.socket.to_string_lossy()))
            .user(Some("root"))
            .prefer_socket(false)
            .stmt_cache_size(Some(1024));
        Conn::new(opts)
    }

    fn failed(&self, what: &str) -> BenchError {
        let stderr = tail(&self.paths.root.join("mariadbd.stderr"), 5);
        BenchError::Data(format!(
            "the MariaDB server {what}; last lines of {}:\n{}{}",
            self.paths.error_log.display(),
            tail(&self.paths.error_log, LOG_TAIL_LINES),
            if stderr.is_empty() {
                String::new()
            } else {
                format!("\nits stderr:\n{stderr}")
            }
        ))
    }

    fn wait_ready(&self) -> BenchResult<()> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.lock().as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(self.failed(&format!("exited at start ({status})")));
                }
            }
            if self.paths.socket.exists() && self.connect().is_ok() {
                return Ok(());
            }
            if started.elapsed() > START_TIMEOUT {
                let _ = self.stop();
                return Err(self.failed(&format!(
                    "did not accept connections within {} s",
                    START_TIMEOUT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clean shutdown: `SHUTDOWN` (InnoDB writes back and checkpoints), then wait for the
    /// process to exit. Idempotent.
    pub fn stop(&self) -> BenchResult<()> {
        let mut guard = self.child.lock();
        let Some(child) = guard.as_mut() else {
            return Ok(());
        };
        let asked = self
            .connect()
            .and_then(|mut c| mysql::prelude::Queryable::query_drop(&mut c, "SHUTDOWN"));
        if asked.is_err() {
            // The statement could not be sent: SIGTERM to our child's pid is also a clean
            // shutdown for mariadbd.
            let _ = Command::new("kill")
                .args(["-TERM", &self.pid.to_string()])
                .status();
        }
        let started = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    *guard = None;
                    if status.success() {
                        return Ok(());
                    }
                    drop(guard);
                    return Err(self.failed(&format!("exited with {status} at shutdown")));
                }
                Ok(None) if started.elapsed() < STOP_TIMEOUT => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    *guard = None;
                    drop(guard);
                    return Err(self.failed(&format!(
                        "did not shut down within {} s and was killed",
                        STOP_TIMEOUT.as_secs()
                    )));
                }
                Err(e) => return Err(BenchError::io("wait for the MariaDB server", e)),
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// Refuse when a server runs on this datadir; remove a dead server's pid file and socket.
fn clear_stale(paths: &ServerPaths) -> BenchResult<()> {
    if let Ok(text) = fs::read_to_string(&paths.pid_file) {
        if let Ok(pid) = text.trim().parse::<u32>() {
            if live_server(pid, &paths.cnf) {
                return Err(BenchError::Usage(format!(
                    "a MariaDB server (pid {pid}) is already running on {}; stop it first \
                     (kill {pid}) or use another --dir",
                    paths.datadir.display()
                )));
            }
        }
        fs::remove_file(&paths.pid_file)
            .map_err(|e| BenchError::io(format!("remove {}", paths.pid_file.display()), e))?;
    }
    if paths.socket.exists() {
        fs::remove_file(&paths.socket)
            .map_err(|e| BenchError::io(format!("remove {}", paths.socket.display()), e))?;
    }
    Ok(())
}

/// Create the datadir with `mariadb-install-db`; a datadir left half-made by a killed install
/// is removed first.
fn install(bins: &Binaries, paths: &ServerPaths) -> BenchResult<()> {
    if paths.datadir.exists() {
        fs::remove_dir_all(&paths.datadir)
            .map_err(|e| BenchError::io(format!("remove {}", paths.datadir.display()), e))?;
    }
    let log = paths.root.join("install.log");
    let out =
        File::create(&log).map_err(|e| BenchError::io(format!("create {}", log.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| BenchError::io(format!("open {}", log.display()), e))?;
    let status = Command::new(&bins.install_db)
        .arg(format!("--defaults-file={}", paths.cnf.display()))
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(|e| BenchError::io(format!("run {}", bins.install_db.display()), e))?;
    if !status.success() {
        return Err(BenchError::Data(format!(
            "{} failed ({status}); last lines of {}:\n{}\nand of {}:\n{}",
            bins.install_db.display(),
            log.display(),
            tail(&log, LOG_TAIL_LINES),
            paths.error_log.display(),
            tail(&paths.error_log, LOG_TAIL_LINES)
        )));
    }
    fs::write(
        paths.root.join(INSTALLED_MARKER),
        b"mariadb-install-db done\n",
    )
    .map_err(|e| BenchError::io("write the install marker", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_dirs_get_a_short_socket() {
        let deep = PathBuf::from("/tmp").join("d".repeat(120));
        let p = ServerPaths::new(&deep).unwrap();
        assert!(p.socket.as_os_str().len() <= SOCKET_PATH_MAX);
        assert!(p.datadir.starts_with(&deep));
        let q = ServerPaths::new(&deep.join("other")).unwrap();
        assert_ne!(p.socket, q.socket);
    }
}
