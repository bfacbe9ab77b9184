//! Source-like text: identifiers from a small vocabulary, keywords, indentation, comments,
//! and lines that repeat, so it compresses about as well as real code does.

use crate::rng::Rng;

/// The kinds of file the generator writes, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    /// Rust.
    Rust,
    /// Python.
    Python,
    /// TypeScript.
    TypeScript,
    /// JavaScript.
    JavaScript,
    /// Go.
    Go,
    /// C source.
    C,
    /// C header.
    CHeader,
    /// Markdown prose.
    Markdown,
    /// JSON data.
    Json,
    /// YAML configuration.
    Yaml,
    /// TOML configuration.
    Toml,
    /// Plain text.
    Text,
    /// A shell script (written executable).
    Shell,
}

/// Every language with its weight in a mixed tree.
pub const LANGS: &[(Lang, u32)] = &[
    (Lang::Rust, 22),
    (Lang::Python, 16),
    (Lang::TypeScript, 16),
    (Lang::JavaScript, 8),
    (Lang::Go, 8),
    (Lang::C, 4),
    (Lang::CHeader, 3),
    (Lang::Markdown, 8),
    (Lang::Json, 6),
    (Lang::Yaml, 3),
    (Lang::Toml, 2),
    (Lang::Text, 2),
    (Lang::Shell, 2),
];

impl Lang {
    /// The file extension, without the dot.
    pub fn ext(self) -> &'static str {
        match self {
            Lang::Rust => "rs",
            Lang::Python => "py",
            Lang::TypeScript => "ts",
            Lang::JavaScript => "js",
            Lang::Go => "go",
            Lang::C => "c",
            Lang::CHeader => "h",
            Lang::Markdown => "md",
            Lang::Json => "json",
            Lang::Yaml => "yaml",
            Lang::Toml => "toml",
            Lang::Text => "txt",
            Lang::Shell => "sh",
        }
    }

    /// A language chosen by the weights in [`LANGS`].
    pub fn random(rng: &mut Rng) -> Lang {
        let weights: Vec<u32> = LANGS.iter().map(|&(_, w)| w).collect();
        LANGS[rng.weighted(&weights)].0
    }
}

/// Words identifiers, names and prose are made of.
pub const WORDS: &[&str] = &[
    "account", "action", "adapter", "agent", "alloc", "apply", "archive", "array", "asset",
    "async", "attr", "audit", "auth", "backend", "batch", "block", "buffer", "builder", "bundle",
    "cache", "call", "cancel", "channel", "check", "chunk", "client", "clock", "codec", "column",
    "commit", "config", "conn", "context", "count", "cursor", "data", "debug", "decode", "delta",
    "digest", "dispatch", "encode", "entry", "error", "event", "field", "file", "filter", "flag",
    "flush", "format", "frame", "handle", "hash", "header", "index", "input", "item", "job", "key",
    "kind", "label", "layer", "limit", "line", "list", "load", "lock", "log", "manifest", "map",
    "message", "meta", "mode", "model", "node", "offset", "option", "order", "output", "owner",
    "packet", "page", "parse", "path", "peer", "plan", "policy", "pool", "prefix", "query",
    "queue", "range", "reader", "record", "region", "render", "request", "result", "retry",
    "route", "row", "rule", "scan", "schema", "scope", "session", "shard", "signal", "size",
    "slot", "source", "span", "state", "status", "stream", "sync", "table", "task", "token",
    "trace", "tree", "user", "value", "version", "view", "worker", "writer",
];

/// Directory names.
pub const DIR_WORDS: &[&str] = &[
    "src",
    "lib",
    "core",
    "utils",
    "components",
    "internal",
    "pkg",
    "api",
    "models",
    "views",
    "tests",
    "fixtures",
    "docs",
    "examples",
    "scripts",
    "config",
    "services",
    "handlers",
    "middleware",
    "store",
    "hooks",
    "styles",
    "assets",
    "vendor",
    "generated",
    "migrations",
    "proto",
    "cmd",
    "tools",
    "server",
    "client",
    "common",
    "shared",
    "platform",
    "plugins",
    "widgets",
    "pages",
    "routes",
    "schemas",
    "templates",
    "i18n",
    "locales",
    "codecs",
    "net",
    "storage",
    "runtime",
    "compiler",
    "parser",
    "ui",
    "db",
];

const HEADERS: &[&str] = &[
    "Copyright (c) The Project Authors. All rights reserved.\nLicensed under the Apache License, Version 2.0 or the MIT license, at your option.\n",
    "SPDX-License-Identifier: MIT OR Apache-2.0\n",
    "This file is part of the project. It is distributed under the terms of the\nGNU General Public License version 3 or later; see COPYING for details.\nDo not edit by hand unless you know what you are doing.\n",
];

/// How identifiers are joined.
#[derive(Clone, Copy)]
enum Case {
    Snake,
    Camel,
    Pascal,
}

fn pick<'a, S: AsRef<str>>(rng: &mut Rng, items: &'a [S]) -> &'a str {
    rng.pick(items).as_ref()
}

fn ident(rng: &mut Rng, case: Case, min: usize, extra: usize) -> String {
    let words = min + if extra > 0 { rng.index(extra) } else { 0 };
    let mut s = String::new();
    for i in 0..words {
        let w = *rng.pick(WORDS);
        match case {
            Case::Snake => {
                if i > 0 {
                    s.push('_');
                }
                s.push_str(w);
            }
            Case::Camel | Case::Pascal => {
                let upper = i > 0 || matches!(case, Case::Pascal);
                let mut chars = w.chars();
                if let Some(c) = chars.next() {
                    if upper {
                        s.extend(c.to_uppercase());
                    } else {
                        s.push(c);
                    }
                    s.push_str(chars.as_str());
                }
            }
        }
    }
    s
}

/// A file or stem name in the style of `lang`.
pub fn file_stem(rng: &mut Rng, lang: Lang) -> String {
    match lang {
        Lang::TypeScript | Lang::JavaScript if rng.chance(500) => ident(rng, Case::Camel, 1, 2),
        _ => ident(rng, Case::Snake, 1, 2),
    }
}

fn sentence(rng: &mut Rng, min: usize, extra: usize) -> String {
    let words = min + if extra > 0 { rng.index(extra) } else { 0 };
    let mut s = String::new();
    for i in 0..words {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(pick(rng, WORDS));
    }
    s
}

/// The syntax of a brace or indentation language.
struct Syntax {
    comment: &'static str,
    func: &'static str,
    var: &'static str,
    end: &'static str,
    open: &'static str,
    close: Option<&'static str>,
    ret: &'static str,
    case: Case,
    log: &'static str,
    import: &'static str,
    indent: &'static str,
}

fn syntax(lang: Lang) -> Syntax {
    let c_like = Syntax {
        comment: "//",
        func: "static int ",
        var: "int ",
        end: ";",
        open: " {",
        close: Some("}"),
        ret: "return ",
        case: Case::Snake,
        log: "fprintf(stderr, \"%s: %d\\n\", __func__, ",
        import: "#include \"",
        indent: "    ",
    };
    match lang {
        Lang::Rust => Syntax {
            func: "pub fn ",
            var: "let ",
            ret: "return ",
            log: "tracing::debug!(\"{}\", ",
            import: "use crate::",
            ..c_like
        },
        Lang::Python | Lang::Shell => Syntax {
            comment: "#",
            func: "def ",
            var: "",
            end: "",
            open: ":",
            close: None,
            ret: "return ",
            case: Case::Snake,
            log: "logger.debug(\"%s\", ",
            import: "from .",
            indent: "    ",
        },
        Lang::TypeScript | Lang::JavaScript => Syntax {
            func: "export function ",
            var: "const ",
            case: Case::Camel,
            log: "console.debug(",
            import: "import { x } from './",
            indent: "  ",
            ..c_like
        },
        Lang::Go => Syntax {
            func: "func ",
            var: "",
            end: "",
            case: Case::Camel,
            log: "log.Printf(\"%v\", ",
            import: "import \"example.com/project/",
            indent: "\t",
            ..c_like
        },
        _ => c_like,
    }
}

/// Writes about `size` bytes of text in the style of `lang` (exactly `size`: the last line is
/// cut).
pub fn generate(rng: &mut Rng, lang: Lang, size: usize) -> Vec<u8> {
    let mut out = String::with_capacity(size + 256);
    match lang {
        Lang::Markdown | Lang::Text => prose(rng, lang, size, &mut out),
        Lang::Json => json(rng, size, &mut out),
        Lang::Yaml | Lang::Toml => config(rng, lang, size, &mut out),
        _ => code(rng, lang, size, &mut out),
    }
    let mut bytes = out.into_bytes();
    bytes.truncate(size);
    bytes
}

fn code(rng: &mut Rng, lang: Lang, size: usize, out: &mut String) {
    let sx = syntax(lang);
    if lang == Lang::Shell {
        out.push_str("#!/usr/bin/env bash\nset -euo pipefail\n");
    }
    if rng.chance(600) {
        for line in rng.pick(HEADERS).lines() {
            out.push_str(sx.comment);
            out.push(' ');
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    // Each file reuses a small set of local names, as real code does.
    let locals: Vec<String> = (0..10).map(|_| ident(rng, sx.case, 1, 2)).collect();
    let types: Vec<String> = (0..4).map(|_| ident(rng, Case::Pascal, 1, 2)).collect();
    for _ in 0..(2 + rng.index(6)) {
        out.push_str(sx.import);
        out.push_str(pick(rng, WORDS));
        if sx.import.ends_with('"') || sx.import.ends_with('/') {
            out.push('"');
        } else if sx.import.ends_with("::") {
            out.push_str("::");
            out.push_str(pick(rng, &types));
        }
        if lang == Lang::Python {
            out.push_str(" import ");
            out.push_str(pick(rng, &locals));
        }
        out.push_str(sx.end);
        out.push('\n');
    }
    out.push('\n');
    let mut recent: Vec<String> = Vec::new();
    let mut functions: Vec<std::ops::Range<usize>> = Vec::new();
    while out.len() < size {
        // Now and then a copy of an earlier function with one name changed, as code that was
        // copied and adapted (this is what makes larger files compress better).
        if !functions.is_empty() && rng.chance(300) {
            let range = functions[rng.index(functions.len())].clone();
            let copy = out[range].replace(pick(rng, &locals), &ident(rng, sx.case, 1, 2));
            let start = out.len();
            out.push_str(&copy);
            functions.push(start..out.len());
            continue;
        }
        let start = out.len();
        // A function: doc comment, signature, body of nested blocks.
        out.push_str(sx.comment);
        out.push(' ');
        out.push_str(&sentence(rng, 4, 8));
        out.push('\n');
        let args = (0..rng.index(4))
            .map(|_| rng.pick(&locals).clone())
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(sx.func);
        out.push_str(&ident(rng, sx.case, 2, 0));
        out.push('(');
        out.push_str(&args);
        out.push(')');
        out.push_str(sx.open);
        out.push('\n');
        let mut depth = 1usize;
        let statements = 3 + rng.index(14);
        for _ in 0..statements {
            let mut line = String::new();
            for _ in 0..depth {
                line.push_str(sx.indent);
            }
            let choice = rng.below(100);
            if choice < 12 && !recent.is_empty() {
                // A repeated line, as boilerplate repeats.
                line = rng.pick(&recent).clone();
            } else if choice < 22 && depth < 5 {
                let kw = if rng.chance(500) { "if " } else { "while " };
                line.push_str(kw);
                line.push_str(pick(rng, &locals));
                line.push_str(if rng.chance(500) { " > " } else { " == " });
                line.push_str(&rng.below(100).to_string());
                line.push_str(sx.open);
                depth += 1;
            } else if choice < 30 && depth > 1 {
                depth -= 1;
                line.truncate(line.len() - sx.indent.len());
                match sx.close {
                    Some(c) => line.push_str(c),
                    None => {
                        line.push_str(sx.ret);
                        line.push_str(pick(rng, &locals));
                    }
                }
            } else if choice < 38 {
                line.push_str(sx.comment);
                line.push(' ');
                line.push_str(&sentence(rng, 3, 7));
            } else if choice < 45 {
                line.push_str(sx.log);
                line.push_str(pick(rng, &locals));
                line.push(')');
                line.push_str(sx.end);
            } else {
                line.push_str(sx.var);
                line.push_str(pick(rng, &locals));
                line.push_str(" = ");
                if rng.chance(500) {
                    line.push_str(pick(rng, &locals));
                    line.push('.');
                }
                line.push_str(&ident(rng, sx.case, 1, 2));
                line.push('(');
                line.push_str(pick(rng, &locals));
                if rng.chance(400) {
                    line.push_str(", ");
                    line.push_str(&rng.below(4096).to_string());
                }
                line.push(')');
                line.push_str(sx.end);
            }
            out.push_str(&line);
            out.push('\n');
            if recent.len() < 16 {
                recent.push(line);
            } else {
                let i = rng.index(recent.len());
                recent[i] = line;
            }
        }
        while depth > 0 {
            depth -= 1;
            for _ in 0..depth {
                out.push_str(sx.indent);
            }
            if let Some(c) = sx.close {
                out.push_str(c);
            }
            out.push('\n');
        }
        out.push('\n');
        functions.push(start..out.len());
    }
}

fn prose(rng: &mut Rng, lang: Lang, size: usize, out: &mut String) {
    while out.len() < size {
        if lang == Lang::Markdown {
            out.push_str(if rng.chance(300) { "# " } else { "## " });
            out.push_str(&sentence(rng, 2, 4));
            out.push_str("\n\n");
        }
        for _ in 0..(1 + rng.index(4)) {
            let words = 8 + rng.index(30);
            out.push_str(&sentence(rng, words, 0));
            out.push_str(".\n");
        }
        if lang == Lang::Markdown && rng.chance(400) {
            for _ in 0..(2 + rng.index(4)) {
                out.push_str("- `");
                out.push_str(pick(rng, WORDS));
                out.push_str("`: ");
                out.push_str(&sentence(rng, 4, 6));
                out.push('\n');
            }
        }
        out.push('\n');
    }
}

fn json(rng: &mut Rng, size: usize, out: &mut String) {
    out.push_str("{\n  \"items\": [\n");
    while out.len() < size {
        out.push_str("    {\n");
        let fields = 2 + rng.index(6);
        for i in 0..fields {
            out.push_str("      \"");
            out.push_str(pick(rng, WORDS));
            out.push_str("\": ");
            match rng.below(3) {
                0 => out.push_str(&rng.below(100_000).to_string()),
                1 => out.push_str(if rng.chance(500) { "true" } else { "null" }),
                _ => {
                    out.push('"');
                    out.push_str(&sentence(rng, 1, 3));
                    out.push('"');
                }
            }
            out.push_str(if i + 1 < fields { ",\n" } else { "\n" });
        }
        out.push_str("    },\n");
    }
    out.push_str("  ]\n}\n");
}

fn config(rng: &mut Rng, lang: Lang, size: usize, out: &mut String) {
    while out.len() < size {
        let section = ident(rng, Case::Snake, 1, 2);
        if lang == Lang::Toml {
            out.push('[');
            out.push_str(&section);
            out.push_str("]\n");
        } else {
            out.push_str(&section);
            out.push_str(":\n");
        }
        for _ in 0..(2 + rng.index(6)) {
            if lang == Lang::Yaml {
                out.push_str("  ");
            }
            out.push_str(&ident(rng, Case::Snake, 1, 2));
            out.push_str(if lang == Lang::Toml { " = " } else { ": " });
            if rng.chance(500) {
                out.push_str(&rng.below(1000).to_string());
            } else {
                out.push('"');
                out.push_str(pick(rng, WORDS));
                out.push('"');
            }
            out.push('\n');
        }
        out.push('\n');
    }
}

/// `size` bytes of binary-looking content (images, archives, model files): random bytes, or
/// when `skewed`, bytes drawn towards small values so they compress a little.
pub fn binary(rng: &mut Rng, size: usize, skewed: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 8);
    while out.len() < size {
        let x = rng.next_u64();
        let x = if skewed { x & rng.next_u64() } else { x };
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(size);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_has_exactly_the_size_asked_for() {
        let mut rng = Rng::new(3);
        for &(lang, _) in LANGS {
            for size in [0, 1, 100, 5000] {
                assert_eq!(generate(&mut rng, lang, size).len(), size, "{lang:?}");
            }
        }
    }

    #[test]
    fn code_looks_like_code() {
        let text = generate(&mut Rng::new(9), Lang::Rust, 4000);
        let text = String::from_utf8(text).expect("generated text is UTF-8");
        assert!(text.contains("pub fn "));
        assert!(text.contains("    let "));
    }
}
