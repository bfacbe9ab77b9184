//! A 3-node Garage cluster on loopback ports (`replication_factor = 3`), started for one test
//! and stopped when dropped. The binary is `$CAIRN_GARAGE`, else `target/garage/bin/garage`
//! (built by `scripts/garage install`).

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One Garage node.
struct Node {
    config: PathBuf,
    s3_port: u16,
    rpc_port: u16,
    child: Option<Child>,
}

/// A running cluster, with one bucket and one key allowed on it.
pub struct Garage {
    bin: PathBuf,
    nodes: Vec<Node>,
    /// The S3 endpoint of node 0 (`http://127.0.0.1:PORT`).
    pub endpoint: String,
    /// The bucket.
    pub bucket: String,
    /// The access key id.
    pub key_id: String,
    /// The secret key.
    pub secret: String,
    _dir: tempfile::TempDir,
}

/// The garage binary, or a panic that says how to build it.
pub fn garage_bin() -> PathBuf {
    if let Ok(p) = std::env::var("CAIRN_GARAGE") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/garage/bin/garage");
    assert!(
        p.exists(),
        "garage is not built at {}: run scripts/garage install (or set CAIRN_GARAGE)",
        p.display()
    );
    p
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .expect("its address")
        .port()
}

fn random_hex(n: usize) -> String {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("random bytes");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

impl Garage {
    /// Starts the cluster, applies a layout with the three nodes, creates bucket `cairn` and a
    /// key allowed to read and write it. Panics (failing the test) if any step fails.
    pub fn start() -> Garage {
        let bin = garage_bin();
        let dir = tempfile::tempdir().expect("garage dir");
        let secret = random_hex(32);
        let mut nodes = Vec::new();
        for i in 0..3 {
            let nd = dir.path().join(format!("node{i}"));
            std::fs::create_dir_all(nd.join("meta")).expect("meta dir");
            std::fs::create_dir_all(nd.join("data")).expect("data dir");
            let (rpc_port, s3_port) = (free_port(), free_port());
            let config = nd.join("garage.toml");
            std::fs::write(
                &config,
                format!(
                    r#"metadata_dir = "{meta}"
data_dir = "{data}"
db_engine = "sqlite"
replication_factor = 3
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "{secret}"
bootstrap_peers = []

[s3_api]
s3_region = "garage"
api_bind_addr = "127.0.0.1:{s3_port}"
root_domain = ".s3.garage.localhost"
"#,
                    meta = nd.join("meta").display(),
                    data = nd.join("data").display(),
                ),
            )
            .expect("garage config");
            nodes.push(Node {
                config,
                s3_port,
                rpc_port,
                child: None,
            });
        }
        let mut g = Garage {
            bin,
            endpoint: format!("http://127.0.0.1:{}", nodes[0].s3_port),
            nodes,
            bucket: "cairn".into(),
            key_id: String::new(),
            secret: String::new(),
            _dir: dir,
        };
        for i in 0..3 {
            g.start_node(i);
        }
        let ids: Vec<String> = (0..3)
            .map(|i| {
                let out = g.retry(i, &["node", "id", "-q"]);
                out.trim().to_string()
            })
            .collect();
        for id in &ids[1..] {
            g.retry(0, &["node", "connect", id]);
        }
        for id in &ids {
            let short = id.split('@').next().expect("node id");
            g.retry(0, &["layout", "assign", "-z", "dc1", "-c", "1GB", short]);
        }
        g.retry(0, &["layout", "apply", "--version", "1"]);
        g.retry(0, &["bucket", "create", "cairn"]);
        let key = g.retry(0, &["key", "create", "cairn-key"]);
        let field = |name: &str| {
            key.lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    (k.trim().eq_ignore_ascii_case(name)).then(|| v.trim().to_string())
                })
                .unwrap_or_else(|| panic!("no '{name}' in garage's key output:\n{key}"))
        };
        g.key_id = field("Key ID");
        g.secret = field("Secret key");
        g.retry(
            0,
            &[
                "bucket",
                "allow",
                "--read",
                "--write",
                "--owner",
                "cairn",
                "--key",
                "cairn-key",
            ],
        );
        g
    }

    /// Runs `garage -c <node i's config> args`, retrying for up to 30 s while the cluster
    /// settles; returns its standard output.
    fn retry(&self, i: usize, args: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = Command::new(&self.bin)
                .arg("-c")
                .arg(&self.nodes[i].config)
                .args(args)
                .output()
                .expect("run garage");
            if out.status.success() {
                return String::from_utf8_lossy(&out.stdout).into_owned();
            }
            if Instant::now() > deadline {
                panic!(
                    "garage {args:?} failed: {}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Starts node `i` (again).
    pub fn start_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let log = node.config.with_file_name("garage.log");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("garage log");
        let child = Command::new(&self.bin)
            .arg("-c")
            .arg(&node.config)
            .arg("server")
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start garage");
        node.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", node.rpc_port)).is_err() {
            assert!(Instant::now() < deadline, "garage node {i} did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops node `i` at once (SIGKILL), as a machine that fails would.
    pub fn kill_node(&mut self, i: usize) {
        if let Some(mut c) = self.nodes[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Remote options for the cluster's bucket.
    pub fn options(&self) -> cairn_remote::RemoteOptions {
        cairn_remote::RemoteOptions {
            endpoint: Some(self.endpoint.clone()),
            region: Some("garage".into()),
            access_key_id: Some(self.key_id.clone()),
            secret_access_key: Some(self.secret.clone()),
            ..Default::default()
        }
    }

    /// The store URL of `prefix` in the bucket.
    pub fn url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }
}

impl Drop for Garage {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill_node(i);
        }
    }
}
