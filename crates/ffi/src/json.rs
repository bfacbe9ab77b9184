//! The JSON documents that cross the boundary: options in, results out. Their schema is
//! documented in `crates/ffi/README.md`. Unknown option fields are refused
//! (`CAIRN_ERR_INVALID_ARGUMENT`), so a typo never silently falls back to a default.

use crate::boundary::{FfiError, FfiResult};
use cairn_store::{Manifest, RelPath, SnapshotId, Stats};
use serde::{Deserialize, Serialize};

pub(crate) fn parse<T: for<'de> Deserialize<'de> + Default>(
    bytes: &[u8],
    what: &str,
) -> FfiResult<T> {
    if bytes.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(bytes)
        .map_err(|e| FfiError::invalid(format!("{what} is not a valid options document: {e}")))
}

pub(crate) fn to_vec<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("reports always serialise")
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Retention"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RetainJson {
    pub count: Option<usize>,
    pub max_age_ms: Option<u64>,
    pub max_total_bytes: Option<u64>,
}

impl RetainJson {
    pub(crate) fn to_retention(&self) -> cairn_store::retain::Retention {
        cairn_store::retain::Retention {
            count: self.count,
            max_age: self.max_age_ms.map(std::time::Duration::from_millis),
            max_total_bytes: self.max_total_bytes,
        }
    }
}

/// The options of `cairn_workspace_watch` (`cairn_snapshot::WatchOptions`).
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "WatchOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct WatchJson {
    /// Watch at most this many directories (those past it are walked by every snapshot).
    pub max_watches: Option<usize>,
}

/// The capture settings of an options document (`cairn_snapshot::CaptureSettings`), its
/// fields in line with the document's own; absent ones leave the settings as they are. A
/// document that embeds it keeps `deny_unknown_fields` (serde still refuses a field neither
/// takes, naming it, though without the list of the fields it expected).
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default)]
pub(crate) struct CaptureJson {
    pub excludes: Vec<String>,
    pub max_file_bytes: Option<u64>,
    pub gitignore: Option<bool>,
    pub refuse_hard_links: Option<bool>,
}

impl CaptureJson {
    /// Adds the document's exclude globs to `capture`'s and sets the settings it gives.
    pub(crate) fn apply_to(self, capture: &mut cairn_snapshot::CaptureSettings) {
        capture.excludes.extend(self.excludes);
        if let Some(v) = self.max_file_bytes {
            capture.max_file_bytes = v;
        }
        if let Some(v) = self.gitignore {
            capture.gitignore = v;
        }
        if let Some(v) = self.refuse_hard_links {
            capture.refuse_hard_links = v;
        }
    }
}

#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "WorkspaceOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct OpenJson {
    pub store: Option<String>,
    pub id: Option<String>,
    #[serde(flatten)]
    pub capture: CaptureJson,
    pub retain: Option<RetainJson>,
    pub gc_grace_ms: Option<u64>,
    pub recover: Option<bool>,
    pub remote: Option<String>,
    pub remote_options: Option<RemoteOptionsJson>,
}

/// How a remote store is reached (`cairn_remote::RemoteOptions`); unset fields fall back to
/// the `AWS_*` variables and the defaults. Not `Debug`: it holds the secret key.
#[derive(Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "RemoteOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RemoteOptionsJson {
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub allow_http: Option<bool>,
    pub connect_timeout_ms: Option<u64>,
    pub request_timeout_ms: Option<u64>,
    pub max_retries: Option<usize>,
    pub retry_timeout_ms: Option<u64>,
    pub lease_ttl_ms: Option<u64>,
    pub extra: std::collections::BTreeMap<String, String>,
}

impl RemoteOptionsJson {
    pub(crate) fn to_options(&self) -> cairn_remote::RemoteOptions {
        let ms = std::time::Duration::from_millis;
        let mut o = cairn_remote::RemoteOptions {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            access_key_id: self.access_key_id.clone(),
            secret_access_key: self.secret_access_key.clone(),
            allow_http: self.allow_http,
            extra: self
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            ..cairn_remote::RemoteOptions::default()
        };
        if let Some(v) = self.connect_timeout_ms {
            o.connect_timeout = ms(v);
        }
        if let Some(v) = self.request_timeout_ms {
            o.request_timeout = ms(v);
        }
        if let Some(v) = self.max_retries {
            o.max_retries = v;
        }
        if let Some(v) = self.retry_timeout_ms {
            o.retry_timeout = ms(v);
        }
        if let Some(v) = self.lease_ttl_ms {
            o.lease_ttl = ms(v);
        }
        o
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "SnapshotOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct SnapshotJson {
    pub label: Option<String>,
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(flatten)]
    pub capture: CaptureJson,
    pub protect: bool,
    pub use_stat_cache: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "RestoreOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct RestoreJson {
    pub dry_run: bool,
    pub reference: Option<String>,
    pub on_drift: Option<cairn_restore::DriftPolicy>,
    pub key: Option<String>,
    pub paths: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "GcOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct GcJson {
    pub grace_ms: Option<u64>,
    pub clock_skew_ms: Option<u64>,
    pub dry_run: bool,
}

#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Skipped"))]
pub(crate) struct SkippedOut {
    pub path: RelPath,
    pub reason: cairn_store::SkipReason,
    pub is_dir: bool,
}

#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "SnapshotKept"))]
pub(crate) struct KeptOut {
    pub path: RelPath,
    pub reason: cairn_snapshot::ExcludeReason,
    pub is_dir: bool,
}

#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "SnapshotInfo"))]
pub(crate) struct SnapshotOut {
    pub id: SnapshotId,
    pub label: Option<String>,
    pub root: cairn_store::TreeId,
    pub created_ms: i64,
    pub workspace_id: String,
    pub protected: bool,
    pub metadata: serde_json::Value,
    pub stats: Stats,
    pub skipped: Vec<SkippedOut>,
    pub excludes: Vec<String>,
    pub max_file_bytes: u64,
}

impl SnapshotOut {
    pub(crate) fn new(id: SnapshotId, m: &Manifest) -> Self {
        SnapshotOut {
            id,
            label: m.label.clone(),
            root: m.root,
            created_ms: m.created_ms,
            workspace_id: m.workspace_id.clone(),
            protected: m.protected,
            metadata: serde_json::from_str(&m.metadata).unwrap_or(serde_json::Value::Null),
            stats: m.stats,
            skipped: m
                .skipped
                .iter()
                .map(|s| SkippedOut {
                    path: RelPath(s.path.clone()),
                    reason: s.reason,
                    is_dir: s.is_dir,
                })
                .collect(),
            excludes: m.capture.excludes.clone(),
            max_file_bytes: m.capture.max_file_bytes,
        }
    }
}

#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "SnapshotTaken"))]
pub(crate) struct TakenOut {
    #[serde(flatten)]
    pub snapshot: SnapshotOut,
    pub kept: Vec<KeptOut>,
    pub prune_error: Option<String>,
    /// What it walked (all of the tree, part of it or nothing, with a watcher) and why.
    pub walk: cairn_snapshot::WalkInfo,
}

#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Change"))]
pub(crate) struct ChangeOut {
    pub path: RelPath,
    pub kind: cairn_snapshot::ChangeKind,
    pub old: Option<cairn_snapshot::EntryInfo>,
    pub new: Option<cairn_snapshot::EntryInfo>,
    /// With `"attribute": true`: the checkpoint intervals the path changed in, oldest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution: Option<Vec<cairn_rewind::Attribution>>,
}

/// The options of `cairn_workspace_diff_with`.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "DiffOptions"))]
#[serde(deny_unknown_fields, default)]
pub(crate) struct DiffJson {
    pub attribute: bool,
}

/// What `cairn_workspace_info` writes. Fields in name order, as the document had them when it
/// was made with `json!`.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "WorkspaceInfo"))]
pub(crate) struct WorkspaceInfoOut<'a> {
    /// The workspace's id.
    pub id: &'a str,
    /// The restores a crash interrupted that opening it completed.
    pub recovered: &'a [cairn_restore::Recovery],
    /// The remote store the store caches (`s3://bucket/prefix`, never with credentials).
    pub remote: Option<String>,
    /// The workspace root.
    pub root: RelPath,
    /// The store directory.
    pub store: RelPath,
    /// Why the store is where it is.
    pub store_home: cairn_restore::home::StoreHome,
}

/// What `cairn_workspace_gc` writes for a workspace whose store caches a remote.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "RemoteGcDone"))]
pub(crate) struct RemoteGcOut<'a> {
    /// Bytes the remote shrank by (as in `remote`).
    pub bytes_freed: u64,
    /// The remote collector's report.
    pub remote: &'a cairn_store::RemoteGcReport,
}

/// What `cairn_workspace_verify` writes: the report, and whether all is well.
#[derive(Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[cfg_attr(test, schemars(rename = "Verified"))]
pub(crate) struct VerifyOut<'a> {
    /// The report.
    #[serde(flatten)]
    pub report: &'a cairn_store::verify::VerifyReport,
    /// Whether all is well.
    pub ok: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boundary::cairn_status;

    #[test]
    fn the_capture_fields_of_an_options_document_are_read_in_line_and_a_typo_is_still_refused() {
        let doc = br#"{"store": "s", "excludes": ["*.log"], "max_file_bytes": 5,
                       "gitignore": false, "refuse_hard_links": true}"#;
        let Ok(o) = parse::<OpenJson>(doc, "workspace options") else {
            panic!("a valid document");
        };
        assert_eq!(o.store.as_deref(), Some("s"));
        let mut capture = cairn_snapshot::CaptureSettings {
            excludes: vec!["build".into()],
            ..Default::default()
        };
        o.capture.apply_to(&mut capture);
        assert_eq!(
            capture,
            cairn_snapshot::CaptureSettings {
                excludes: vec!["build".into(), "*.log".into()],
                max_file_bytes: 5,
                gitignore: false,
                refuse_hard_links: true,
            }
        );
        // Absent fields leave the settings as they were.
        let Ok(o) = parse::<SnapshotJson>(br#"{"label": "x"}"#, "snapshot options") else {
            panic!("a valid document");
        };
        let before = capture.clone();
        o.capture.apply_to(&mut capture);
        assert_eq!(capture, before);
        for bad in [
            &br#"{"exclude": ["x"]}"#[..],
            br#"{"max_file_bytes": "big"}"#,
        ] {
            let Err(e) = parse::<SnapshotJson>(bad, "snapshot options") else {
                panic!("refused");
            };
            assert_eq!(e.status, cairn_status::CAIRN_ERR_INVALID_ARGUMENT);
            assert!(e.message.contains("snapshot options"), "{}", e.message);
        }
        let Err(e) = parse::<OpenJson>(br#"{"gitignor": false}"#, "workspace options") else {
            panic!("refused");
        };
        assert!(e.message.contains("gitignor"), "{}", e.message);
    }
}
