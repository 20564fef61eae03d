//! `memd serve`: start-up, the running daemon, and an orderly shutdown.
//!
//! Owns the process lifecycle: data-dir checks (created 0700; an existing one others can read
//! and a token others can read are narrowed, with a warning) and lock, token, store recovery,
//! model loading in the background, the HTTP listener, workers, signals, and the final
//! snapshot. Must never start a second daemon on the same data dir, never run in a data dir
//! others can write to, and never exit on SIGTERM before in-flight requests finished and the
//! store was flushed.

use crate::http::{self, Server};
use anyhow::{Context, Result};
use memd_engine::config::Config;
use memd_engine::core::Core;
use memd_engine::models::embed::{self, Embed};
use memd_engine::shutdown;
use memd_engine::store::DirLock;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

pub async fn serve(cfg: Config) -> Result<()> {
    let narrowed = prepare_data_dir(&cfg.data_dir)?;
    let _lock = DirLock::acquire(&cfg.data_dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    // After the lock: a second daemon that loses it must not touch the running one's log.
    crate::logging::init(&cfg.data_dir)?;
    for note in &narrowed {
        warn!("{note}");
    }
    // Before the listener opens: its connection cap is sized from this limit.
    #[cfg(unix)]
    match http::listener::raise_open_file_limit() {
        Some(n) => info!("open-file limit {n}"),
        None => warn!("cannot read the open-file limit; serving at most the default connections"),
    }
    let token = crate::guard::load_or_create_token(&cfg.token_path())?;
    let started = std::time::Instant::now();
    // The store opens before the port does: until then a hook finds nothing listening and
    // goes on without memd, instead of waiting in the accept queue for its whole deadline.
    let open_cfg = cfg.clone();
    let (core, opened) = tokio::task::spawn_blocking(move || Core::open(open_cfg)).await??;
    info!(
        "store open in {} ms ({opened})",
        started.elapsed().as_millis()
    );
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], cfg.port)))
        .await
        .with_context(|| {
            format!(
                "cannot listen on 127.0.0.1:{} (is another program using it? set MEMD_PORT)",
                cfg.port
            )
        })?;
    let port = listener.local_addr()?.port();
    let mut core = core;
    core.cfg.port = port;
    let data_dir = core.cfg.data_dir.clone();
    let core = Arc::new(core);
    load_model_in_background(core.clone());
    let (trigger, stop) = shutdown::channel();
    let mut workers = core.spawn_workers(&stop);
    if core.cfg.store.url.is_some() {
        workers.push(memd_pg::spawn(
            memd_engine::shared_sync::SharedSync::new(core.clone()),
            stop.clone(),
        )?);
    }
    let mcp = crate::mcp::http_service(core.clone(), stop.clone());
    let server = Arc::new(Server {
        core: core.clone(),
        ui: Arc::new(crate::ui::Dashboard::new(core.clone(), token.clone())),
        token,
        mcp: Some(mcp),
    });
    // Signal handlers are installed before the daemon announces itself: a SIGTERM sent as
    // soon as daemon.json appears must shut down cleanly, not kill the process.
    let signals = Signals::install()?;
    tokio::spawn(async move {
        signals.wait().await;
        info!("shutting down");
        trigger.fire();
    });
    write_daemon_file(&data_dir, port)?;
    info!(
        "listening on 127.0.0.1:{port}, data in {}",
        data_dir.display()
    );
    http::serve(listener, server, stop).await?;
    for w in workers {
        let _ = w.await;
    }
    std::fs::remove_file(data_dir.join(proto::paths::DAEMON_FILE)).ok();
    match sole_owner(core, RELEASE_LIMIT).await {
        Ok(core) => tokio::task::spawn_blocking(move || core.close())
            .await?
            .map_err(|e| anyhow::anyhow!("final snapshot failed: {e}"))?,
        Err(_) => warn!(
            "core still shared {} s after shutdown; skipping the final snapshot (the \
             write-ahead log holds everything)",
            RELEASE_LIMIT.as_secs()
        ),
    }
    info!("stopped");
    Ok(())
}

/// How long shutdown waits for background holders of the core to let go.
const RELEASE_LIMIT: Duration = Duration::from_secs(10);

/// The core, once nothing else holds it. At shutdown a few holders may still be finishing: the
/// model loader (a SIGTERM right after start arrives while the model loads, ~0.3 s) or a
/// blocking embedding. Closing the store needs sole ownership, so wait for them, bounded.
async fn sole_owner(mut core: Arc<Core>, limit: Duration) -> Result<Core, Arc<Core>> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match Arc::try_unwrap(core) {
            Ok(core) => return Ok(core),
            Err(shared) if std::time::Instant::now() < deadline => {
                core = shared;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(shared) => return Err(shared),
        }
    }
}

/// Creates the data dir 0700 and refuses one others can write to (they could have planted a
/// token or a store). One others can only read or enter is narrowed to 0700, and a token file
/// others can read to 0600: a hook or an older memd may have made them so. Returns a warning
/// per narrowing, for the caller to log (the daemon's logging starts only after the lock).
pub fn prepare_data_dir(dir: &Path) -> Result<Vec<String>> {
    if !dir.exists() {
        proto::paths::create_private_dir(dir)
            .with_context(|| format!("cannot create data dir {}", dir.display()))?;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o022 != 0 {
            anyhow::bail!(
                "refusing to start: data dir {} is writable by other users (mode {:o}); run `chmod 700 {}`",
                dir.display(),
                mode & 0o777,
                dir.display()
            );
        }
    }
    let mut narrowed = Vec::new();
    narrowed.extend(narrow(dir, 0o700, "data dir")?);
    narrowed.extend(narrow(
        &dir.join(proto::paths::TOKEN_FILE),
        0o600,
        "token file",
    )?);
    proto::paths::create_private_dir(&dir.join("logs")).ok();
    Ok(narrowed)
}

/// Sets `path` to `private` when group or others have any permission on it. Returns the
/// warning to log; `None` when it was private already or does not exist.
#[cfg(unix)]
fn narrow(path: &Path, private: u32, what: &str) -> Result<Option<String>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = match std::fs::metadata(path) {
        Ok(meta) => meta.permissions().mode() & 0o777,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    if mode & 0o077 == 0 {
        return Ok(None);
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(private))
        .with_context(|| format!("cannot chmod {private:o} {}", path.display()))?;
    Ok(Some(format!(
        "{what} {} was open to other users (mode {mode:o}); changed it to {private:o}",
        path.display()
    )))
}

#[cfg(not(unix))]
fn narrow(_path: &Path, _private: u32, _what: &str) -> Result<Option<String>> {
    Ok(None)
}

fn write_daemon_file(dir: &Path, port: u16) -> Result<()> {
    let info = proto::paths::DaemonInfo {
        port,
        pid: std::process::id(),
        version: env!("CARGO_PKG_VERSION").into(),
    };
    let path = dir.join(proto::paths::DAEMON_FILE);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec(&info)?)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

fn load_model_in_background(core: Arc<Core>) {
    std::thread::spawn(move || {
        let paths = embed::RuntimePaths::resolve();
        let before = footprint_mark(&core);
        let result = paths.check().and_then(|()| {
            let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
            embed::OnnxEmbedder::load(&paths, threads)
                .map(|e| Arc::new(e) as Arc<dyn Embed>)
                .map_err(|e| format!("model failed to load: {e:#}"))
        });
        match &result {
            Ok(_) => info!("embedding model loaded"),
            Err(e) => warn!("{e}"),
        }
        let loaded = result.is_ok();
        // Before publishing: loading freed ~50 MB that glibc would otherwise keep.
        memd_engine::heap::release_freed_memory();
        if loaded {
            note_footprint(&core, "embedder", before);
        }
        core.set_embedder(result);
        if loaded && core.cfg.search.rerank {
            load_late_interaction(&core, &paths);
            if core.cfg.search.cross_encoder_depth > 0 {
                load_reranker(&core, &paths);
            }
        }
    });
}

/// After the embedder: the late-interaction model that reranks prompts and searches. Missing or
/// broken, both keep the fused order, with a warning.
fn load_late_interaction(core: &Core, paths: &embed::RuntimePaths) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let before = footprint_mark(core);
    match embed::LateInteraction::load(&paths.ort_lib, &embed::late_interaction_dir(), threads) {
        Ok(model) => {
            info!("late-interaction model loaded");
            memd_engine::heap::release_freed_memory();
            note_footprint(core, "late_interaction", before);
            core.set_late_model(Arc::new(model));
        }
        Err(e) => warn!("late-interaction model not loaded, prompts keep the fused order: {e:#}"),
    }
}

/// After the embedder (searches work without it): the cross-encoder for `/api/search` and the
/// MCP search tool. A missing or broken reranker leaves the fused order, with a warning.
fn load_reranker(core: &Core, paths: &embed::RuntimePaths) {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let before = footprint_mark(core);
    match embed::CrossEncoder::load(&paths.ort_lib, &embed::reranker_dir(), threads) {
        Ok(ce) => {
            info!("reranker loaded");
            memd_engine::heap::release_freed_memory();
            note_footprint(core, "cross_encoder", before);
            core.set_reranker(Arc::new(ce));
        }
        Err(e) => warn!("reranker not loaded, searches keep the fused order: {e:#}"),
    }
}

/// The anonymous resident set and the bytes `memd stats` counts as anonymous outside the
/// models, before a load. Anonymous only: the ONNX Runtime library's pages, mapped by the
/// first load, are file-backed and counted under `code`.
fn footprint_mark(core: &Core) -> Option<(u64, u64)> {
    let counted = core
        .stats()
        .memory
        .components
        .iter()
        .filter(|(name, _)| !name.starts_with("model.") && *name != "code")
        .map(|(_, bytes)| bytes)
        .sum();
    Some((memd_engine::heap::resident()?.anon, counted))
}

/// Records how much the anonymous resident set grew (after the trim) since `before` while
/// `model` loaded: its weights and its ONNX Runtime session.
/// Other threads keep working meanwhile (token states load beside the embedder), so what the
/// counted components grew by is taken off; still a measurement, labelled so in `memd stats`.
fn note_footprint(core: &Core, model: &'static str, before: Option<(u64, u64)>) {
    if let (Some((rss, counted)), Some((rss_now, counted_now))) = (before, footprint_mark(core)) {
        let grown = rss_now.saturating_sub(rss);
        let others = counted_now.saturating_sub(counted);
        core.note_model_footprint(model, grown.saturating_sub(others));
    }
}

/// SIGTERM and SIGINT (Windows: the console's Ctrl-C, Ctrl-Break, close and shutdown events),
/// registered at once so none is missed.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(windows)]
    ctrl_c: tokio::signal::windows::CtrlC,
    #[cfg(windows)]
    ctrl_break: tokio::signal::windows::CtrlBreak,
    #[cfg(windows)]
    close: tokio::signal::windows::CtrlClose,
    #[cfg(windows)]
    shutdown: tokio::signal::windows::CtrlShutdown,
}

impl Signals {
    fn install() -> Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows;
            Ok(Signals {
                ctrl_c: windows::ctrl_c()?,
                ctrl_break: windows::ctrl_break()?,
                close: windows::ctrl_close()?,
                shutdown: windows::ctrl_shutdown()?,
            })
        }
    }

    async fn wait(mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(windows)]
        tokio::select! {
            _ = self.ctrl_c.recv() => {}
            _ = self.ctrl_break.recv() => {}
            _ = self.close.recv() => {}
            _ = self.shutdown.recv() => {}
        }
    }
}
