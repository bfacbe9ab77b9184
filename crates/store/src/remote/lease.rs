//! A lease: what a machine holds on the remote while it works, so that the remote's
//! collector spares what it uses.

use super::*;

/// A lease object's content.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseInfo {
    /// The host that holds it.
    pub host: String,
    /// The process that holds it.
    pub pid: u32,
    /// What it does.
    pub kind: OperationKind,
    /// When the operation began (its clock), ms since the Unix epoch.
    pub started_ms: i64,
    /// Until when the lease holds unless renewed (its clock), ms since the Unix epoch.
    pub expires_ms: i64,
    /// Snapshots the operation needs kept.
    pub pins: Vec<SnapshotId>,
    /// The format version (1).
    #[serde(default)]
    pub version: u32,
}

pub(super) static LEASE_COUNTER: AtomicU64 = AtomicU64::new(0);

pub(super) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "host".into())
}

#[derive(Debug)]
pub(super) struct LeaseShared {
    pub(super) stop: Mutex<bool>,
    pub(super) wake: Condvar,
    /// The expiry of the last renewal that reached the remote.
    pub(super) expires_ms: AtomicI64,
    /// Set when a renewal came after the lease had run out: the lease is lost for good.
    pub(super) lost: AtomicBool,
}

/// A lease held on the remote for one operation; dropping it stops the renewals and deletes
/// the lease object.
#[derive(Debug)]
pub struct Lease {
    key: String,
    remote: Arc<dyn Remote>,
    shared: Arc<LeaseShared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    pub(super) fn take(
        config: RemoteConfig,
        kind: OperationKind,
        pins: &[SnapshotId],
    ) -> Result<Lease> {
        let host = host_name();
        let pid = std::process::id();
        let n = LEASE_COUNTER.fetch_add(1, Ordering::Relaxed);
        let started_ms = fsutil::now_ms();
        let key = format!("leases/{host}-{pid}-{n}-{started_ms:x}");
        let ttl_ms = config.lease_ttl.as_millis() as i64;
        let mut info = LeaseInfo {
            host,
            pid,
            kind,
            started_ms,
            expires_ms: started_ms + ttl_ms,
            pins: pins.to_vec(),
            version: FORMAT_VERSION,
        };
        let body = serde_json::to_vec(&info).expect("a lease always serialises");
        config.remote.put(&key, body)?;
        let shared = Arc::new(LeaseShared {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            expires_ms: AtomicI64::new(info.expires_ms),
            lost: AtomicBool::new(false),
        });
        let thread = {
            let shared = shared.clone();
            let remote = config.remote.clone();
            let thread_key = key.clone();
            let every = config.lease_ttl / 3;
            std::thread::Builder::new()
                .name("cairn-lease".into())
                .spawn(move || loop {
                    {
                        let mut stop = shared.stop.lock();
                        if !*stop {
                            shared.wake.wait_for(&mut stop, every);
                        }
                        if *stop {
                            return;
                        }
                    }
                    let now = fsutil::now_ms();
                    if now >= shared.expires_ms.load(Ordering::Acquire) {
                        // Too late: a collector may have counted this lease as gone.
                        shared.lost.store(true, Ordering::Release);
                        return;
                    }
                    info.expires_ms = now + ttl_ms;
                    let body = serde_json::to_vec(&info).expect("a lease always serialises");
                    if remote.put(&thread_key, body).is_ok() {
                        shared.expires_ms.store(info.expires_ms, Ordering::Release);
                    }
                })
                .map_err(|e| Error::io("start the lease thread", PathBuf::from(&key), e))?
        };
        Ok(Lease {
            key,
            remote: config.remote,
            shared,
            thread: Some(thread),
        })
    }

    /// Its key on the remote.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Checks that the lease still holds, with `margin` to spare: an operation that lost its
    /// lease must not publish a manifest (a collector may have removed what it reused).
    pub fn check(&self, margin: Duration) -> Result<()> {
        let expires = self.shared.expires_ms.load(Ordering::Acquire);
        let lost = self.shared.lost.load(Ordering::Acquire);
        if lost || fsutil::now_ms() + margin.as_millis() as i64 >= expires {
            return Err(Error::Busy {
                what: format!("lease {} on {}", self.key, self.remote.location()),
                detail: "it ran out before the operation finished (the remote was unreachable, or the process was paused); nothing was published, run the operation again".into(),
            });
        }
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self.shared.stop.lock() = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = self.remote.delete(&self.key);
    }
}
