//! A client of `codex app-server`: Codex's JSON-RPC interface on stdio (one JSON object a
//! line), the interface Codex's own clients use. Cairn asks it what Codex thinks of the hooks
//! (`hooks/list`), records their trust (`config/batchWrite`) and takes a conversation back
//! (`thread/resume`, `thread/revert`).

use crate::error::{Error, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long one call may take before Cairn gives up on the app-server.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `codex app-server`, stopped when dropped.
pub struct AppServer {
    program: PathBuf,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    next: u64,
}

impl AppServer {
    /// Starts `program app-server` in `cwd` (the caller's directory when `None`) and
    /// initializes it.
    pub fn start(program: &Path, cwd: Option<&Path>) -> Result<AppServer> {
        let mut cmd = Command::new(program);
        cmd.arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        let mut child = cmd.spawn().map_err(|source| Error::Io {
            action: "run",
            path: program.to_path_buf(),
            source,
        })?;
        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = AppServer {
            program: program.to_path_buf(),
            child,
            stdin,
            lines,
            next: 0,
        };
        server.call(
            "initialize",
            serde_json::json!({"clientInfo": {"name": "cairn", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        server.send(&serde_json::json!({"method": "initialized"}))?;
        Ok(server)
    }

    fn error(&self, reason: String) -> Error {
        Error::AppServer {
            program: self.program.clone(),
            reason,
        }
    }

    fn send(&mut self, message: &serde_json::Value) -> Result<()> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .map_err(|e| self.error(format!("it stopped reading its input ({e})")))
    }

    /// Calls `method` with `params`: its result, or its error as an [`Error::AppServer`].
    /// Notifications that come meanwhile are passed over.
    pub fn call(&mut self, method: &str, params: serde_json::Value) -> Result<serde_json::Value> {
        self.next += 1;
        let id = self.next;
        self.send(&serde_json::json!({"id": id, "method": method, "params": params}))?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    return Err(self.error(format!(
                        "no answer to {method} within {} s",
                        CALL_TIMEOUT.as_secs()
                    )))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.error(format!("it exited before answering {method}")))
                }
            };
            let Ok(message) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if message["id"].as_u64() != Some(id) || message.get("method").is_some() {
                continue;
            }
            if let Some(e) = message.get("error") {
                let text = e["message"].as_str().unwrap_or("an error").to_string();
                return Err(self.error(format!("{method}: {text}")));
            }
            return Ok(message.get("result").cloned().unwrap_or_default());
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
