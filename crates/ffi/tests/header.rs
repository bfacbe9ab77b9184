//! The committed header is what cbindgen (pinned) generates from this crate.

#![allow(unsafe_code)]

use std::path::PathBuf;

const MAINPAGE: &str = r#"/*
 * cairn.h: the C ABI of Cairn, a workspace time machine for AI coding agents.
 *
 * Conventions
 *   - Opaque handles (cairn_workspace, cairn_hold, cairn_cancel, cairn_error, cairn_buf) are
 *     made by a _open/_new function and released by their _free function, which accepts NULL
 *     and must not be called twice.
 *   - Arguments: the handle, the inputs, the outputs, then `cairn_error **err_out` (NULL to
 *     ignore the detail). Every fallible function returns a cairn_status; CAIRN_OK is 0.
 *     Outputs are written only on CAIRN_OK. There is no thread-local "last error".
 *   - Strings and paths cross as (const uint8_t *ptr, size_t len) bytes: (NULL, 0) is empty;
 *     paths are raw bytes, so non-UTF-8 names round-trip. Structured options go in as JSON
 *     documents (an empty one means the defaults; unknown fields are refused), results come
 *     out as JSON documents in owned cairn_buf buffers: read them with cairn_buf_bytes, free
 *     them with cairn_buf_free. In JSON, a path is a string when it is UTF-8 and
 *     {"hex": "..."} otherwise. Never call free() on the library's memory.
 *   - Panics never cross the boundary: they become CAIRN_ERR_PANIC.
 *   - Progress callbacks take userdata first, run only on the thread that called the
 *     function, one at a time, and stop the operation with CAIRN_ERR_ABORTED_BY_CALLBACK when
 *     they return non-zero. A cairn_cancel token may be triggered from any thread.
 *
 * Thread safety
 *   - Functions taking `const cairn_workspace *` may be called concurrently from several
 *     threads on one handle (the store is shared safely by threads and processes). A restore
 *     and a snapshot of the same workspace at once are safe: the restore holds the workspace
 *     and re-checks its plan. cairn_workspace_free must not race any other call on the handle.
 *   - cairn_cancel_cancel may be called from any thread at any time before cairn_cancel_free.
 *   - cairn_error and cairn_buf objects belong to the caller and are not shared by the
 *     library: use each from one thread at a time.
 *
 * Stability: while the version is 0.x there is no ABI stability between releases; bindings
 * check cairn_abi_version() against CAIRN_ABI_VERSION when they load.
 */"#;

fn generate() -> String {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    config.header = Some(MAINPAGE.to_string());
    config.after_includes = Some(format!(
        "\n#define CAIRN_VERSION_MAJOR {}\n#define CAIRN_VERSION_MINOR {}\n#define CAIRN_VERSION_PATCH {}\n#define CAIRN_VERSION_STRING \"{}\"\n#define CAIRN_VERSION_NUMBER ((CAIRN_VERSION_MAJOR * 1000000) + (CAIRN_VERSION_MINOR * 1000) + CAIRN_VERSION_PATCH)\n",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION"),
    ));
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates")
        .write(&mut out);
    String::from_utf8(out).expect("utf-8 header")
}

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../include/cairn.h");
    let generated = generate();
    if std::env::var_os("CAIRN_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write header");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/cairn.h is out of date: run `CAIRN_BLESS=1 cargo test -p cairn-ffi --test header`"
    );
}

#[test]
fn the_header_version_macros_match_cargo_toml() {
    let header = generate();
    let want = [
        format!(
            "#define CAIRN_VERSION_MAJOR {}",
            env!("CARGO_PKG_VERSION_MAJOR")
        ),
        format!(
            "#define CAIRN_VERSION_MINOR {}",
            env!("CARGO_PKG_VERSION_MINOR")
        ),
        format!(
            "#define CAIRN_VERSION_PATCH {}",
            env!("CARGO_PKG_VERSION_PATCH")
        ),
        format!("#define CAIRN_ABI_VERSION {}", cairn::CAIRN_ABI_VERSION),
    ];
    for w in want {
        assert!(header.contains(&w), "missing {w}");
    }
    // SAFETY: cairn_version returns a static NUL-terminated string.
    let v = unsafe { std::ffi::CStr::from_ptr(cairn::cairn_version()) };
    assert_eq!(v.to_str().expect("utf-8"), env!("CARGO_PKG_VERSION"));
}
