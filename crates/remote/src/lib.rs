//! `cairn-remote`: remote object stores behind a Cairn store, through the
//! [`object_store`] crate (S3 and S3-compatible servers such as Garage or MinIO, Google Cloud
//! Storage, Azure Blob Storage, a local directory, memory).
//!
//! A store URL names the remote: `s3://bucket/prefix`, `gs://bucket/prefix`,
//! `az://container/prefix`, `file:///path`, `memory:///`. For S3 the endpoint, region and
//! credentials come from [`RemoteOptions`] or, where an option is unset, from the usual
//! `AWS_*` variables (`AWS_ENDPOINT`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, ...). The local directory given beside it is the cache: see
//! [`cairn_store::remote`] for what is mirrored and when.
//!
//! ```no_run
//! # fn main() -> Result<(), cairn_store::Error> {
//! let store = cairn_remote::open(
//!     "s3://cairn/team-a",
//!     "/var/cache/cairn/agent-1",
//!     &cairn_remote::RemoteOptions::default(),
//! )?;
//! # Ok(()) }
//! ```
//!
//! `object_store` is asynchronous: each [`ObjectStoreRemote`] runs it on a small private tokio
//! runtime (one worker thread) behind the blocking [`Remote`] calls, and counts the requests it
//! makes and the bytes it moves ([`Remote::stats`]).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use cairn_store::remote::{Remote, RemoteConfig, RemoteObject, RemoteStats};
use cairn_store::{Error, ErrorKind, Result, Store, StoreOptions};
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload,
    RetryConfig, WriteMultipart,
};
use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Files up to this size are uploaded in one request; larger ones in parts of this size.
const PART_BYTES: usize = 8 << 20;

/// How a remote is reached. `Default`: everything from the URL and the environment, short
/// connect and retry limits so an unreachable endpoint fails within seconds.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// The S3 endpoint (`http://127.0.0.1:3900`); default `AWS_ENDPOINT`, else AWS itself.
    pub endpoint: Option<String>,
    /// The S3 region; default `AWS_REGION` (or `AWS_DEFAULT_REGION`), else `us-east-1`.
    pub region: Option<String>,
    /// The access key id; default `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// The secret access key; default `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<String>,
    /// Allow plain HTTP; default: when the endpoint starts with `http://`.
    pub allow_http: Option<bool>,
    /// How long to wait for a connection (default 3 s).
    pub connect_timeout: Duration,
    /// How long one request may take, upload or download included (default 300 s).
    pub request_timeout: Duration,
    /// Retries of a failed request (default 3), within `retry_timeout` of the first try.
    pub max_retries: usize,
    /// No retry starts later than this after the first try (default 5 s).
    pub retry_timeout: Duration,
    /// Further `object_store` configuration keys and values (for `gs://` and `az://` too).
    pub extra: Vec<(String, String)>,
    /// The lease time of the store's operations (default 60 s).
    pub lease_ttl: Duration,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            allow_http: None,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(300),
            max_retries: 3,
            retry_timeout: Duration::from_secs(5),
            extra: Vec::new(),
            lease_ttl: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    puts: AtomicU64,
    gets: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    busy_us: AtomicU64,
}

/// Adds the time it lived to `busy_us` when dropped.
struct Busy<'a>(&'a AtomicU64, std::time::Instant);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0
            .fetch_add(self.1.elapsed().as_micros() as u64, Ordering::Relaxed);
    }
}

/// A [`Remote`] over any [`ObjectStore`], with a private runtime and request counters.
#[derive(Debug)]
pub struct ObjectStoreRemote {
    store: Arc<dyn ObjectStore>,
    prefix: ObjectPath,
    location: String,
    runtime: tokio::runtime::Runtime,
    counters: Counters,
}

/// `url` as messages may show it: without a user name, password or query, which may hold
/// credentials.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        // Unparsable: with an '@' or a '?' (which may start credentials), only its scheme.
        Err(_) if url.contains(['@', '?']) => match url.split_once(':') {
            Some((scheme, _)) => format!("{scheme}:…"),
            None => "…".to_string(),
        },
        Err(_) => url.to_string(),
    }
}

fn invalid(url: &str, detail: impl std::fmt::Display) -> Error {
    let shown = redacted(url);
    // The detail may quote the URL, credentials and all.
    let mut detail = detail.to_string().replace(url, &shown);
    if let Ok(u) = url::Url::parse(url) {
        for secret in [u.password().unwrap_or(""), u.query().unwrap_or("")] {
            if !secret.is_empty() {
                detail = detail.replace(secret, "***");
            }
        }
    }
    Error::InvalidArgument(format!(
        "'{shown}' is not a store URL Cairn can use: {detail} (use s3://bucket/prefix, gs://bucket/prefix, az://container/prefix, file:///path or memory:///)"
    ))
}

/// Connects to the remote that `url` names. Nothing is requested yet: a bad endpoint or bad
/// credentials show at the first request (opening a store lists the remote at once).
pub fn connect(url: &str, options: &RemoteOptions) -> Result<Arc<ObjectStoreRemote>> {
    let parsed = url::Url::parse(url).map_err(|e| invalid(url, e))?;
    let (scheme, path) = ObjectStoreScheme::parse(&parsed).map_err(|e| invalid(url, e))?;
    let store: Arc<dyn ObjectStore> = match scheme {
        ObjectStoreScheme::AmazonS3 => {
            let mut b = AmazonS3Builder::from_env().with_url(url);
            if let Some(e) = &options.endpoint {
                b = b.with_endpoint(e);
            }
            let endpoint = options
                .endpoint
                .clone()
                .or_else(|| std::env::var("AWS_ENDPOINT").ok())
                .or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
            if let (None, Some(e)) = (&options.endpoint, &endpoint) {
                b = b.with_endpoint(e);
            }
            if let Some(r) = &options.region {
                b = b.with_region(r);
            }
            if let Some(k) = &options.access_key_id {
                b = b.with_access_key_id(k);
            }
            if let Some(k) = &options.secret_access_key {
                b = b.with_secret_access_key(k);
            }
            let http = options.allow_http.unwrap_or_else(|| {
                endpoint
                    .as_deref()
                    .is_some_and(|e| e.starts_with("http://"))
            });
            let client = ClientOptions::new()
                .with_connect_timeout(options.connect_timeout)
                .with_timeout(options.request_timeout)
                .with_allow_http(http);
            let retry = RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: options.max_retries,
                retry_timeout: options.retry_timeout,
            };
            b = b.with_client_options(client).with_retry(retry);
            for (k, v) in &options.extra {
                let key = k.parse().map_err(|e| invalid(url, e))?;
                b = b.with_config(key, v);
            }
            Arc::new(b.build().map_err(|e| invalid(url, e))?)
        }
        _ => {
            let (s, _) = object_store::parse_url_opts(&parsed, options.extra.clone())
                .map_err(|e| invalid(url, e))?;
            Arc::from(s)
        }
    };
    let location = format!(
        "{}://{}{}",
        parsed.scheme(),
        parsed.host_str().unwrap_or(""),
        parsed.path()
    );
    ObjectStoreRemote::new(store, path, location)
}

/// Store options that make a store the cache of the remote `url` names.
pub fn store_options(url: &str, options: &RemoteOptions) -> Result<StoreOptions> {
    let remote = connect(url, options)?;
    Ok(StoreOptions {
        remote: Some(RemoteConfig {
            remote,
            lease_ttl: options.lease_ttl,
        }),
        ..StoreOptions::default()
    })
}

/// Opens the store whose remote `url` names, with its cache in `cache_dir` (created when
/// missing). Fails with a clear `DENIED` or `IO` error when the remote cannot be listed.
pub fn open(url: &str, cache_dir: impl AsRef<Path>, options: &RemoteOptions) -> Result<Store> {
    Store::open(cache_dir, store_options(url, options)?)
}

impl ObjectStoreRemote {
    /// Wraps `store`, with every key under `prefix`; `location` names it in messages.
    pub fn new(
        store: Arc<dyn ObjectStore>,
        prefix: ObjectPath,
        location: String,
    ) -> Result<Arc<ObjectStoreRemote>> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("cairn-remote")
            .enable_all()
            .build()
            .map_err(|e| Error::io("start the remote runtime", location.clone(), e))?;
        Ok(Arc::new(ObjectStoreRemote {
            store,
            prefix,
            location,
            runtime,
            counters: Counters::default(),
        }))
    }

    fn path(&self, key: &str) -> ObjectPath {
        let mut parts: Vec<String> = self
            .prefix
            .parts()
            .map(|p| p.as_ref().to_string())
            .collect();
        parts.extend(key.split('/').filter(|s| !s.is_empty()).map(str::to_string));
        ObjectPath::from_iter(parts)
    }

    fn key_of(&self, path: &ObjectPath) -> String {
        let n = self.prefix.parts().count();
        path.parts()
            .skip(n)
            .map(|p| p.as_ref().to_string())
            .collect::<Vec<_>>()
            .join("/")
    }

    fn error(&self, action: &str, key: &str, e: object_store::Error) -> Error {
        let kind = match &e {
            object_store::Error::NotFound { .. } => ErrorKind::NotFound,
            object_store::Error::PermissionDenied { .. }
            | object_store::Error::Unauthenticated { .. } => ErrorKind::Denied,
            // S3 clients report a refused signature or key as a generic error carrying the
            // HTTP status (the retry error that holds it is private to object_store).
            _ if denied_status(&e) => ErrorKind::Denied,
            _ => ErrorKind::Io,
        };
        let hint = match kind {
            ErrorKind::Denied => "; check the access key, the secret and the bucket's permissions (options, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
            ErrorKind::Io => "; check that the endpoint is reachable and the bucket exists (options, or AWS_ENDPOINT), then retry",
            _ => "",
        };
        Error::Remote {
            action: format!("{action} {key}"),
            location: self.location.clone(),
            detail: format!("{e}{hint}"),
            kind,
        }
    }

    fn busy(&self) -> Busy<'_> {
        Busy(&self.counters.busy_us, std::time::Instant::now())
    }

    fn count(&self, counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether the error (or one of its sources) is an HTTP 401 or 403 answer.
fn denied_status(e: &object_store::Error) -> bool {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&s.to_string());
        source = s.source();
    }
    text.contains("403 Forbidden") || text.contains("401 Unauthorized")
}

fn is_not_found(e: &object_store::Error) -> bool {
    matches!(e, object_store::Error::NotFound { .. })
}

impl Remote for ObjectStoreRemote {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn put(&self, key: &str, bytes: Vec<u8>) -> Result<()> {
        let _busy = self.busy();
        let n = bytes.len() as u64;
        self.count(&self.counters.puts);
        let path = self.path(key);
        self.runtime
            .block_on(self.store.put(&path, PutPayload::from(bytes)))
            .map_err(|e| self.error("upload", key, e))?;
        self.counters.bytes_sent.fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    fn put_file(&self, key: &str, path: &Path) -> Result<()> {
        let mut f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = f
            .metadata()
            .map_err(|e| Error::io("inspect", path, e))?
            .len();
        if len <= PART_BYTES as u64 {
            let mut buf = Vec::with_capacity(len as usize);
            f.read_to_end(&mut buf)
                .map_err(|e| Error::io("read", path, e))?;
            return self.put(key, buf);
        }
        let dest = self.path(key);
        let _busy = self.busy();
        self.count(&self.counters.puts);
        let upload = self
            .runtime
            .block_on(self.store.put_multipart(&dest))
            .map_err(|e| self.error("start uploading", key, e))?;
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
        let mut buf = vec![0u8; PART_BYTES];
        let result: Result<()> = (|| {
            loop {
                let k = match f.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(Error::io("read", path, e)),
                };
                self.runtime
                    .block_on(w.wait_for_capacity(4))
                    .map_err(|e| self.error("upload", key, e))?;
                w.write(&buf[..k]);
                self.counters
                    .bytes_sent
                    .fetch_add(k as u64, Ordering::Relaxed);
            }
            Ok(())
        })();
        let parts = len.div_ceil(PART_BYTES as u64);
        self.counters.puts.fetch_add(parts, Ordering::Relaxed);
        self.counters.requests.fetch_add(parts, Ordering::Relaxed);
        if let Err(e) = result {
            let _ = self.runtime.block_on(w.abort());
            return Err(e);
        }
        self.count(&self.counters.puts);
        self.runtime
            .block_on(w.finish())
            .map_err(|e| self.error("finish uploading", key, e))?;
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, i64)>> {
        let _busy = self.busy();
        self.count(&self.counters.gets);
        let path = self.path(key);
        let result = self.runtime.block_on(async {
            let r = self.store.get(&path).await?;
            let modified = r.meta.last_modified.timestamp_millis();
            let bytes = r.bytes().await?;
            Ok::<_, object_store::Error>((bytes.to_vec(), modified))
        });
        match result {
            Ok((bytes, modified)) => {
                self.counters
                    .bytes_received
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                Ok(Some((bytes, modified)))
            }
            Err(e) if is_not_found(&e) => Ok(None),
            Err(e) => Err(self.error("download", key, e)),
        }
    }

    fn get_to_file(&self, key: &str, dest: &Path) -> Result<bool> {
        let _busy = self.busy();
        self.count(&self.counters.gets);
        let path = self.path(key);
        let mut file = cairn_store::fsutil::create_new_file(dest)?;
        let result = self.runtime.block_on(async {
            let r = self.store.get(&path).await?;
            let mut stream = r.into_stream();
            let mut n = 0u64;
            while let Some(chunk) = stream.next().await {
                let chunk = chunk?;
                n += chunk.len() as u64;
                if let Err(e) = file.write_all(&chunk) {
                    return Ok(Err(Error::io("write", dest, e)));
                }
            }
            Ok::<_, object_store::Error>(Ok(n))
        });
        let outcome = match result {
            Ok(Ok(n)) => {
                self.counters.bytes_received.fetch_add(n, Ordering::Relaxed);
                file.sync_all()
                    .map_err(|e| Error::io("sync", dest, e))
                    .map(|_| true)
            }
            Ok(Err(e)) => Err(e),
            Err(e) if is_not_found(&e) => Ok(false),
            Err(e) => Err(self.error("download", key, e)),
        };
        if !matches!(outcome, Ok(true)) {
            let _ = std::fs::remove_file(dest);
        }
        outcome
    }

    fn list(&self, prefix: &str) -> Result<Vec<RemoteObject>> {
        let _busy = self.busy();
        let path = self.path(prefix);
        let result = self.runtime.block_on(async {
            let mut stream = self.store.list(Some(&path));
            let mut out = Vec::new();
            while let Some(meta) = stream.next().await {
                out.push(meta?);
            }
            Ok::<_, object_store::Error>(out)
        });
        // A listing is paged by the server (1,000 keys a page on S3).
        let metas = result.map_err(|e| self.error("list", prefix, e))?;
        let pages = (metas.len() as u64 / 1000) + 1;
        self.counters.lists.fetch_add(pages, Ordering::Relaxed);
        self.counters.requests.fetch_add(pages, Ordering::Relaxed);
        Ok(metas
            .into_iter()
            .map(|m| RemoteObject {
                key: self.key_of(&m.location),
                size: m.size,
                modified_ms: m.last_modified.timestamp_millis(),
            })
            .collect())
    }

    fn delete(&self, key: &str) -> Result<()> {
        let _busy = self.busy();
        self.count(&self.counters.deletes);
        let path = self.path(key);
        match self.runtime.block_on(self.store.delete(&path)) {
            Ok(()) => Ok(()),
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(self.error("delete", key, e)),
        }
    }

    fn stats(&self) -> RemoteStats {
        let c = &self.counters;
        RemoteStats {
            requests: c.requests.load(Ordering::Relaxed),
            puts: c.puts.load(Ordering::Relaxed),
            gets: c.gets.load(Ordering::Relaxed),
            lists: c.lists.load(Ordering::Relaxed),
            deletes: c.deletes.load(Ordering::Relaxed),
            bytes_sent: c.bytes_sent.load(Ordering::Relaxed),
            bytes_received: c.bytes_received.load(Ordering::Relaxed),
            busy_us: c.busy_us.load(Ordering::Relaxed),
        }
    }
}
