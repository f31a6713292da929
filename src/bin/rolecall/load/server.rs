//! The server under test as a child process: `rolecall serve` of this same
//! binary, on a free loopback port, so the load tool's client and sink never
//! share a thread (or an allocator) with the server they measure. With
//! `ROLECALL_LOAD_SERVER_BIN` set, that binary serves instead: two builds
//! compared with one driver, one sink and one way of measuring.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `rolecall serve` child; killed (and its scratch directory removed, if
/// it has one) on drop.
pub struct ServerProcess {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    scratch: Option<PathBuf>,
}

impl ServerProcess {
    /// Starts `rolecall serve` on `dir` with `env` (`ROLECALL_*` settings)
    /// on a free port; returns once `/healthz` answers 200, with the time
    /// that took. `scratch` removes `dir` when the server is dropped.
    pub fn start(
        dir: &Path,
        env: &[(String, String)],
        scratch: bool,
    ) -> Result<(Self, Duration), String> {
        let exe = match std::env::var_os("ROLECALL_LOAD_SERVER_BIN") {
            Some(exe) => PathBuf::from(exe),
            None => std::env::current_exe().map_err(|e| e.to_string())?,
        };
        let port = free_port()?;
        let started = Instant::now();
        let child = Command::new(exe)
            .arg("serve")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("ROLECALL_SERVER__LISTEN", format!("127.0.0.1:{port}"))
            .env("ROLECALL_STORAGE__DATA_DIR", dir)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut server = ServerProcess {
            child,
            port,
            scratch: scratch.then(|| dir.to_path_buf()),
        };
        let deadline = started + Duration::from_secs(120);
        loop {
            if healthz(port) {
                return Ok((server, started.elapsed()));
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(format!("the server exited ({status}) before serving"));
            }
            if Instant::now() > deadline {
                return Err("the server did not serve within 120 s".into());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The base URL, e.g. `http://127.0.0.1:40123`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Resident memory of the server, in MiB (0 when unreadable).
    pub fn resident_mb(&self) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        let kb: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        kb / 1024.0
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A loopback port nothing listens on (the OS's pick, released at once).
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    Ok(port)
}

/// Whether `GET /healthz` answers 200 (a plain blocking HTTP/1.1 request).
fn healthz(port: u16) -> bool {
    use std::io::{Read, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}
