//! `cockpit serve`: the dashboard live in the browser.
//!
//! One page with both screens of the dashboard, the last step seen and the diagnosis verdict,
//! redrawn as the log (or the JSON-lines stream of a running training) grows: the server looks
//! at the log every `interval`, and the page hears of each change through server-sent events
//! (`/events`) and reloads its two images. No JavaScript framework and nothing from a CDN: the
//! page works offline.
//!
//! The server is read-only and serves a fixed set of routes — `/`, `/primary.png`,
//! `/secondary.png`, `/state`, `/events` — computed from the one log named at start; every
//! other path is 404. No part of a request reaches the file system.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use cockpit_diagnose::Diagnoser;
use cockpit_plot::{PlotOptions, Screen, render_png};
use cockpit_quantities::Output;
use cockpit_quantities::log::read_any;
use tokio::sync::watch;

/// How `cockpit serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The log: Cockpit's JSON log or a JSON-lines stream (`.jsonl`).
    pub log: PathBuf,
    /// The address to bind: 127.0.0.1 by default.
    pub address: IpAddr,
    /// The port (0: any free port; the one taken is printed).
    pub port: u16,
    /// How often to look at the log.
    pub interval: Duration,
    /// The size of each screen's image.
    pub size: (u32, u32),
}

impl ServeOptions {
    /// Serves `log` on 127.0.0.1:8787, looking at it every 500 ms, screens of 1600×800.
    pub fn new(log: impl Into<PathBuf>) -> Self {
        Self {
            log: log.into(),
            address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 8787,
            interval: Duration::from_millis(500),
            size: (1600, 800),
        }
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound (in use, or not this machine's).
    #[error("cannot listen on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The runtime or the server failed.
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What the page shows: the latest read of the log.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    /// Bumped at each change of the log.
    version: u64,
    output: Arc<Output>,
    last_step: Option<usize>,
    verdict: String,
    /// Why the log could not be read at the last look (the previous read is kept).
    problem: Option<String>,
}

impl Snapshot {
    fn json(&self) -> String {
        serde_json::json!({
            "version": self.version,
            "last_step": self.last_step,
            "verdict": self.verdict,
            "problem": self.problem,
        })
        .to_string()
    }
}

/// A screen's PNG image of one version of the log.
type Drawn = (u64, Screen, Arc<Vec<u8>>);

/// The server's shared state: the latest snapshot, its change notifications and the images
/// drawn for it.
struct Shared {
    updates: watch::Receiver<Snapshot>,
    size: (u32, u32),
    /// The screens' images of the latest version drawn, each drawn once.
    images: Mutex<Vec<Drawn>>,
    log_name: String,
}

/// Binds the address, prints `serving <log> on http://<address>` and serves until the process
/// is stopped (Ctrl-C).
///
/// # Errors
///
/// [`ServeError::Bind`] if the address cannot be bound, [`ServeError::Io`] if the server fails.
pub fn run(options: ServeOptions) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(options))
}

async fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let address = SocketAddr::new(options.address, options.port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })?;
    let bound = listener.local_addr()?;
    if !options.address.is_loopback() {
        crate::console::err(format_args!(
            "warning: serving on {bound}, reachable from other machines: anyone who can reach \
             it can read this run's dashboard\n"
        ));
    }
    let (sender, updates) = watch::channel(Snapshot::default());
    tokio::spawn(watch_log(options.log.clone(), options.interval, sender));
    let shared = Arc::new(Shared {
        updates,
        size: options.size,
        images: Mutex::new(Vec::new()),
        log_name: options
            .log
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    });
    let app = Router::new()
        .route("/", get(page))
        .route("/primary.png", get(primary))
        .route("/secondary.png", get(secondary))
        .route("/state", get(state))
        .route("/events", get(events))
        .fallback(not_found)
        .with_state(shared);
    crate::console::out(format_args!(
        "serving {} on http://{bound}\n",
        options.log.display()
    ));
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

/// Looks at the log every `interval`; when its length or modification time changed, reads it
/// and publishes a new snapshot. A log that cannot be read (not there yet, cut mid-write) keeps
/// the previous snapshot and says why.
async fn watch_log(log: PathBuf, interval: Duration, sender: watch::Sender<Snapshot>) {
    let mut seen: Option<(u64, Option<SystemTime>)> = None;
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        let stamp = std::fs::metadata(&log)
            .ok()
            .map(|m| (m.len(), m.modified().ok()));
        if stamp.is_some() && stamp == seen {
            continue;
        }
        let read = {
            let log = log.clone();
            tokio::task::spawn_blocking(move || read_snapshot(&log)).await
        };
        let mut next = sender.borrow().clone();
        match read {
            Ok(Ok((output, last_step, verdict))) => {
                seen = stamp;
                next.output = Arc::new(output);
                next.last_step = last_step;
                next.verdict = verdict;
                next.problem = None;
            }
            Ok(Err(problem)) => {
                if next.problem.as_ref() == Some(&problem) {
                    continue;
                }
                next.problem = Some(problem);
            }
            Err(join) => next.problem = Some(join.to_string()),
        }
        next.version += 1;
        if sender.send(next).is_err() {
            return;
        }
    }
}

/// The log's output, its last step and the diagnosis verdict.
fn read_snapshot(log: &Path) -> Result<(Output, Option<usize>, String), String> {
    let output = read_any(log).map_err(|e| e.to_string())?;
    let last_step = output.steps().max();
    let diagnosis = Diagnoser::new().run(&output);
    let verdict = diagnosis
        .summary
        .unwrap_or_else(|| "nothing flagged".to_string());
    Ok((output, last_step, verdict))
}

/// The page, with the state now filled in (so it shows the run before the first event).
async fn page(State(shared): State<Arc<Shared>>) -> Html<String> {
    let snapshot = shared.updates.borrow().clone();
    let step = match snapshot.last_step {
        Some(step) => format!("last step seen: {step}"),
        None => "waiting for the log…".to_string(),
    };
    let image = |screen: &str| match snapshot.last_step {
        Some(_) => format!("/{screen}.png?v={}", snapshot.version),
        None => String::new(),
    };
    let verdict = if snapshot.verdict.is_empty() {
        "waiting for the log…"
    } else {
        &snapshot.verdict
    };
    Html(
        PAGE.replace("{{LOG}}", &escape(&shared.log_name))
            .replace("{{STEP}}", &escape(&step))
            .replace(
                "{{PROBLEM}}",
                &escape(snapshot.problem.as_deref().unwrap_or("")),
            )
            .replace("{{PRIMARY}}", &image("primary"))
            .replace("{{SECONDARY}}", &image("secondary"))
            .replace("{{VERDICT}}", &escape(verdict)),
    )
}

async fn primary(State(shared): State<Arc<Shared>>) -> Response {
    image(shared, Screen::Primary).await
}

async fn secondary(State(shared): State<Arc<Shared>>) -> Response {
    image(shared, Screen::Secondary).await
}

/// The screen's image for the latest snapshot (drawn once per version and screen).
async fn image(shared: Arc<Shared>, screen: Screen) -> Response {
    let snapshot = shared.updates.borrow().clone();
    let cached = shared.images.lock().ok().and_then(|cache| {
        cache
            .iter()
            .find(|(version, drawn, _)| *version == snapshot.version && *drawn == screen)
            .map(|(_, _, png)| png.clone())
    });
    if let Some(png) = cached {
        return png_response(png.as_ref().clone());
    }
    let (width, height) = shared.size;
    let options = PlotOptions {
        width,
        height,
        screen,
        title: format!("Cockpit: {}", shared.log_name),
    };
    let output = snapshot.output.clone();
    let drawn = tokio::task::spawn_blocking(move || render_png(&output, &options)).await;
    match drawn {
        Ok(Ok((png, _))) => {
            let png = Arc::new(png);
            if let Ok(mut cache) = shared.images.lock() {
                cache.retain(|(version, _, _)| *version == snapshot.version);
                cache.push((snapshot.version, screen, png.clone()));
            }
            png_response(png.as_ref().clone())
        }
        Ok(Err(err)) => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()).into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

fn png_response(png: Vec<u8>) -> Response {
    (
        [
            (header::CONTENT_TYPE, "image/png"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        png,
    )
        .into_response()
}

async fn state(State(shared): State<Arc<Shared>>) -> Response {
    let json = shared.updates.borrow().json();
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// The snapshot now, then one event per change.
async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let mut updates = shared.updates.clone();
    updates.mark_changed();
    let stream = futures_util::stream::unfold(updates, |mut updates| async move {
        updates.changed().await.ok()?;
        let json = updates.borrow_and_update().json();
        Some((Ok(Event::default().data(json)), updates))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

async fn not_found() -> (StatusCode, &'static str) {
    (StatusCode::NOT_FOUND, "not found")
}

/// `text` safe inside HTML.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '&' => "&amp;".to_string(),
            '<' => "&lt;".to_string(),
            '>' => "&gt;".to_string(),
            '"' => "&quot;".to_string(),
            '\'' => "&#39;".to_string(),
            c => c.to_string(),
        })
        .collect()
}

const PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Cockpit: {{LOG}}</title>
<style>
  body { font-family: sans-serif; margin: 1em; background: #fafafa; color: #222; }
  header { display: flex; gap: 2em; align-items: baseline; }
  h1 { font-size: 1.3em; margin: 0; }
  #step { font-weight: bold; }
  #problem { color: #a33; }
  img { display: block; width: 100%; max-width: 1600px; margin: 0.8em 0; background: #fff; }
  #verdict { font-size: 1.1em; padding: 0.6em; background: #fff; border-left: 4px solid #37c; }
</style>
</head>
<body>
<header>
  <h1>Cockpit: {{LOG}}</h1>
  <span id="step">{{STEP}}</span>
  <span id="problem">{{PROBLEM}}</span>
</header>
<img id="primary" src="{{PRIMARY}}" alt="the primary screen (drawn once the log has a tracked step)">
<img id="secondary" src="{{SECONDARY}}" alt="the secondary screen">
<p id="verdict">diagnosis: {{VERDICT}}</p>
<script>
  const show = (state) => {
    document.getElementById("step").textContent =
      state.last_step === null ? "no tracked step yet" : "last step seen: " + state.last_step;
    document.getElementById("problem").textContent = state.problem ? state.problem : "";
    document.getElementById("verdict").textContent = "diagnosis: " + state.verdict;
    if (state.last_step !== null) {
      for (const id of ["primary", "secondary"]) {
        const src = "/" + id + ".png?v=" + state.version;
        const image = document.getElementById(id);
        if (image.getAttribute("src") !== src) image.src = src;
      }
    }
  };
  const events = new EventSource("/events");
  events.onmessage = (message) => show(JSON.parse(message.data));
</script>
</body>
</html>
"#;
