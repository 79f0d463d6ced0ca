//! `cockpit serve`: the dashboard live in the browser.
//!
//! One page with both screens of the dashboard, the last step seen and the diagnosis verdict,
//! redrawn as the log (or the JSON-lines stream of a running training) grows: the server looks
//! at the log every `interval`, and the page hears of each change through server-sent events
//! (`/events`) and reloads its two images. No JavaScript framework and nothing from a CDN: the
//! page works offline.
//!
//! A stream is followed by its tail ([`Follower`]): a look reads what was appended, not the
//! whole file, and the diagnosis reruns on a schedule, so an appended step costs what was
//! appended.
//!
//! The server is read-only and serves a fixed set of routes — `/` (`/?static`: images only),
//! `/primary.png`, `/secondary.png`, `/map.png` (the data map of the per-example table beside
//! the log), `/data`, `/hist`, `/state`, `/events`, `/uplot.js`, `/uplot.css` — computed from the one log
//! named at start (and its table); every other path is 404. No part of a request reaches the
//! file system.
//!
//! Against hostile clients: a request whose `Host` is not one of the server's names is
//! refused (a DNS-rebinding page cannot read the dashboard); a connection has
//! [`HEADER_TIMEOUT`] to send its request's headers; at most [`HALF_OPEN_CAP`] connections
//! may be waiting to send theirs (a new one closes the oldest of them, so a flood of
//! half-open connections cannot keep a real request out) and [`CONNECTION_CAP`] may be open
//! at all; each image is drawn once per version of the log, however many ask for it. SIGINT
//! and SIGTERM end open event streams and stop the server within about a second.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use crate::follow::Follower;
use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::{StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use cockpit_plot::{PlotOptions, Screen, render_png};
use cockpit_quantities::Output;
use cockpit_quantities::log::Reader;
use cockpit_quantities::persample::ErrorChain;
use tokio::sync::{OnceCell, Semaphore, oneshot, watch};

/// How long a connection may take to send a request's headers before it is closed.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The most connections still sending their first request's headers; a new one closes the
/// oldest of them.
pub const HALF_OPEN_CAP: usize = 64;
/// The most connections open at once (pages, images, event streams); past it a new one is
/// closed at once.
pub const CONNECTION_CAP: usize = 256;
/// How long open connections get to finish after SIGINT or SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

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
    /// Further names the server answers to in the `Host` header (beyond `localhost` and the
    /// loopback addresses, or the bound address), e.g. a machine name behind a tunnel.
    pub allowed_hosts: Vec<String>,
    /// How the log and the per-example table beside it are read (the largest file taken).
    pub reader: Reader,
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
            allowed_hosts: Vec::new(),
            reader: Reader::default(),
        }
    }
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound (in use, or not this machine's).
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The runtime or the server failed.
    #[error("the server failed")]
    Io(#[from] std::io::Error),
}

/// What the page shows: the latest read of the log.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    /// Bumped at each change of the log.
    version: u64,
    last_step: Option<usize>,
    verdict: String,
    /// Why the log could not be read at the last look (the previous read is kept).
    problem: Option<String>,
    /// Images drawn since the server started (each version and screen once).
    drawn: u64,
}

impl Snapshot {
    fn json(&self) -> String {
        serde_json::json!({
            "version": self.version,
            "last_step": self.last_step,
            "verdict": self.verdict,
            "problem": self.problem,
            "drawn": self.drawn,
        })
        .to_string()
    }
}

/// A screen's PNG image of one version of the log, drawn once for every request that asks.
type Drawn = (u64, Screen, Arc<OnceCell<Result<Arc<Vec<u8>>, String>>>);

/// The server's shared state: the latest snapshot, its change notifications and the images
/// drawn for it.
struct Shared {
    updates: watch::Receiver<Snapshot>,
    /// The run as read so far, kept up to date in place by the log's watcher.
    run: Arc<RwLock<Output>>,
    size: (u32, u32),
    /// The screens' images of the latest version drawn, each drawn once.
    images: Mutex<Vec<Drawn>>,
    /// Images drawn so far (the `drawn` of `/state`).
    draws: std::sync::atomic::AtomicU64,
    log_name: String,
    /// The per-example table beside the log (`run.examples.csv`), drawn as the data map.
    table: PathBuf,
    /// How the table is read.
    reader: Reader,
    /// The map of the table as last drawn, by the table's length and modification time.
    map: Mutex<Option<(TableStamp, Arc<Vec<u8>>)>>,
    /// Turns true at SIGINT or SIGTERM: event streams end.
    stop: watch::Receiver<bool>,
}

/// Binds the address, prints `serving <log> on http://<address>` and serves until SIGINT
/// (Ctrl-C) or SIGTERM, which end open event streams; returns within about a second of it.
///
/// # Errors
///
/// [`ServeError::Bind`] if the address cannot be bound, [`ServeError::Io`] if the server fails.
pub fn run(options: ServeOptions) -> Result<(), ServeError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let served = runtime.block_on(serve(options));
    // A drawing still running does not hold the exit up.
    runtime.shutdown_timeout(SHUTDOWN_GRACE);
    served
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
    let run = Arc::new(RwLock::new(Output::new()));
    tokio::spawn(watch_log(
        options.log.clone(),
        options.reader,
        options.interval,
        run.clone(),
        sender,
    ));
    let (stop_sender, stop) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_sender.send(true);
    });
    let shared = Arc::new(Shared {
        updates,
        run,
        size: options.size,
        images: Mutex::new(Vec::new()),
        draws: std::sync::atomic::AtomicU64::new(0),
        table: crate::examples::resolve(&options.log),
        reader: options.reader,
        map: Mutex::new(None),
        log_name: options
            .log
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        stop: stop.clone(),
    });
    let app = Router::new()
        .route("/", get(page))
        .route("/data", get(data))
        .route("/map.png", get(map))
        .route("/hist", get(hist))
        .route("/uplot.js", get(uplot_js))
        .route("/uplot.css", get(uplot_css))
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
    let hosts = Arc::new(allowed_hosts(
        options.address,
        bound.port(),
        &options.allowed_hosts,
    ));
    let connections = Arc::new(Semaphore::new(CONNECTION_CAP));
    accept(listener, app, hosts, connections.clone(), stop).await;
    // Open connections (their event streams ended) get a moment to close.
    let all = u32::try_from(CONNECTION_CAP).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connections.acquire_many(all)).await;
    Ok(())
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// SIGINT (Ctrl-C) or, on Unix, SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The names a request's `Host` may carry: `localhost` and the loopback addresses when bound
/// to loopback, else the bound address; with or without the port; plus `extra`.
fn allowed_hosts(address: IpAddr, port: u16, extra: &[String]) -> Vec<String> {
    let mut names: Vec<String> = if address.is_loopback() {
        vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
    } else {
        match address {
            IpAddr::V4(v4) => vec![v4.to_string()],
            IpAddr::V6(v6) => vec![format!("[{v6}]")],
        }
    };
    names.extend(extra.iter().map(|n| n.to_ascii_lowercase()));
    let with_port: Vec<String> = names.iter().map(|n| format!("{n}:{port}")).collect();
    names.extend(with_port);
    names
}

/// Accepts connections until `stop`: each served by hyper with [`HEADER_TIMEOUT`], within
/// [`CONNECTION_CAP`], the oldest of more than [`HALF_OPEN_CAP`] half-open ones closed.
async fn accept(
    listener: tokio::net::TcpListener,
    app: Router,
    hosts: Arc<Vec<String>>,
    connections: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) {
    type Waiting = Arc<Mutex<VecDeque<(u64, oneshot::Sender<()>)>>>;
    let waiting: Waiting = Arc::new(Mutex::new(VecDeque::new()));
    let mut next_id: u64 = 0;
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors or a reset before accept: keep serving the others.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = stopped(&mut stop) => return,
        };
        let id = next_id;
        next_id += 1;
        let (evict, evicted) = oneshot::channel();
        if let Ok(mut queue) = waiting.lock() {
            if queue.len() >= HALF_OPEN_CAP
                && let Some((_, oldest)) = queue.pop_front()
            {
                let _ = oldest.send(());
            }
            queue.push_back((id, evict));
        }
        let tower = hyper_util::service::TowerToHyperService::new(app.clone());
        let (hosts, waiting_here) = (hosts.clone(), waiting.clone());
        // A slot among the open connections, taken when the first request arrives (so that
        // half-open connections, bounded on their own, never hold one).
        let slot: Arc<Mutex<Option<tokio::sync::OwnedSemaphorePermit>>> =
            Arc::new(Mutex::new(None));
        let connections_here = connections.clone();
        let service =
            hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                // Its request arrived: no longer half-open.
                if let Ok(mut queue) = waiting_here.lock() {
                    queue.retain(|(waiting_id, _)| *waiting_id != id);
                }
                let has_slot = match slot.lock() {
                    Ok(mut held) => {
                        if held.is_none() {
                            *held = connections_here.clone().try_acquire_owned().ok();
                        }
                        held.is_some()
                    }
                    Err(_) => false,
                };
                let host = request
                    .headers()
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .map(str::to_ascii_lowercase);
                let allowed = host.as_ref().is_some_and(|h| hosts.contains(h));
                let routed = hyper::service::Service::call(&tower, request);
                async move {
                    if !has_slot {
                        Ok((
                            StatusCode::SERVICE_UNAVAILABLE,
                            "too many open connections; try again",
                        )
                            .into_response())
                    } else if allowed {
                        routed.await
                    } else {
                        Ok((
                            StatusCode::MISDIRECTED_REQUEST,
                            "this server answers to its own address only (Host header refused)",
                        )
                            .into_response())
                    }
                }
            });
        let mut stop = stop.clone();
        let waiting = waiting.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            // A sender dropped because the request arrived is not an eviction.
            let evicted = async {
                if evicted.await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = evicted => {}
                () = stopped(&mut stop) => {
                    connection.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connection).await;
                }
            }
            if let Ok(mut queue) = waiting.lock() {
                queue.retain(|(waiting_id, _)| *waiting_id != id);
            }
        });
    }
}

/// Looks at the log every `interval`; when its length or modification time changed, reads
/// what changed into the shown run ([`Follower`]: a stream's appended lines only) and
/// publishes a new snapshot. A log that cannot be read (not there yet, cut mid-write) keeps
/// the previous run and says why.
async fn watch_log(
    log: PathBuf,
    reader: Reader,
    interval: Duration,
    run: Arc<RwLock<Output>>,
    sender: watch::Sender<Snapshot>,
) {
    let mut seen: Option<(u64, Option<SystemTime>)> = None;
    let mut follower = Some(Follower::new(&reader, &log));
    let mut ticker = tokio::time::interval(interval);
    loop {
        ticker.tick().await;
        let stamp = cockpit_quantities::log::change_stamp(&log);
        if stamp.is_some() && stamp == seen {
            continue;
        }
        let mut moved = follower
            .take()
            .unwrap_or_else(|| Follower::new(&reader, &log));
        let run = run.clone();
        let looked = tokio::task::spawn_blocking(move || {
            let look = moved.look(&mut write(&run));
            (moved, look)
        })
        .await;
        let mut next = sender.borrow().clone();
        match looked {
            Ok((moved, Ok(look))) => {
                follower = Some(moved);
                seen = stamp;
                if !look.changed && look.verdict.is_none() && look.problem == next.problem {
                    continue;
                }
                next.last_step = look.last_step;
                if let Some(verdict) = look.verdict {
                    next.verdict = verdict;
                }
                next.problem = look.problem;
            }
            Ok((moved, Err(problem))) => {
                follower = Some(moved);
                if next.problem.as_ref() == Some(&problem) {
                    continue;
                }
                next.problem = Some(problem);
            }
            // A panic in the read: the next look starts over with a new follower.
            Err(join) => next.problem = Some(join.to_string()),
        }
        next.version += 1;
        if sender.send(next).is_err() {
            return;
        }
    }
}

/// The shown run for writing; a lock poisoned by a panicking reader is taken over (the run
/// is only ever replaced or appended to whole lines).
fn write(run: &RwLock<Output>) -> std::sync::RwLockWriteGuard<'_, Output> {
    run.write().unwrap_or_else(|poison| poison.into_inner())
}

/// The shown run for reading (as [`write`]).
fn read(run: &RwLock<Output>) -> std::sync::RwLockReadGuard<'_, Output> {
    run.read().unwrap_or_else(|poison| poison.into_inner())
}

/// The page, with the state now filled in (so it shows the run before the first event).
async fn page(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Html<String> {
    let template = if query.as_deref() == Some("static") {
        PAGE
    } else {
        LIVE_PAGE
    };
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
        template
            .replace("{{STYLE}}", STYLE)
            .replace("{{SHOW}}", SHOW)
            .replace("{{LOG}}", &escape(&shared.log_name))
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

/// The screen's image for the latest snapshot: drawn once per version and screen, however
/// many requests ask at once (they wait for the one drawing).
async fn image(shared: Arc<Shared>, screen: Screen) -> Response {
    let snapshot = shared.updates.borrow().clone();
    let cell = match shared.images.lock() {
        Ok(mut cache) => {
            cache.retain(|(version, _, _)| *version == snapshot.version);
            match cache
                .iter()
                .find(|(version, drawn, _)| *version == snapshot.version && *drawn == screen)
            {
                Some((_, _, cell)) => cell.clone(),
                None => {
                    let cell = Arc::new(OnceCell::new());
                    cache.push((snapshot.version, screen, cell.clone()));
                    cell
                }
            }
        }
        Err(_) => Arc::new(OnceCell::new()),
    };
    let drawn = cell
        .get_or_init(|| async {
            let (width, height) = shared.size;
            let options = PlotOptions {
                width,
                height,
                screen,
                title: format!("Cockpit: {}", shared.log_name),
            };
            let run = shared.run.clone();
            shared
                .draws
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            match tokio::task::spawn_blocking(move || render_png(&read(&run), &options)).await {
                Ok(Ok((png, _))) => Ok(Arc::new(png)),
                Ok(Err(err)) => Err(ErrorChain(&err).to_string()),
                Err(err) => Err(err.to_string()),
            }
        })
        .await;
    match drawn {
        Ok(png) => png_response(png.as_ref().clone()),
        Err(err) => (StatusCode::SERVICE_UNAVAILABLE, err.clone()).into_response(),
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
    let mut snapshot = shared.updates.borrow().clone();
    snapshot.drawn = shared.draws.load(std::sync::atomic::Ordering::Relaxed);
    let json = snapshot.json();
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

/// The snapshot now, then one event per change.
async fn events(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let mut updates = shared.updates.clone();
    updates.mark_changed();
    // Ends at shutdown, so that the server can stop with a page open.
    let stop = shared.stop.clone();
    let stream =
        futures_util::stream::unfold((updates, stop), |(mut updates, mut stop)| async move {
            let changed = tokio::select! {
                changed = updates.changed() => changed.is_ok(),
                () = stopped(&mut stop) => false,
            };
            if !changed {
                return None;
            }
            let json = updates.borrow_and_update().json();
            Some((Ok(Event::default().data(json)), (updates, stop)))
        });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// The line instruments' values from step `from` on (`/data?from=S`; every step without it),
/// for the page's charts: each number-valued key as one series, each per-parameter list as one
/// series per parameter. The page asks again from its last step after each event, so an
/// update sends what was appended (and the last step again: a two-step quantity fills it a
/// step late).
async fn data(State(shared): State<Arc<Shared>>, RawQuery(query): RawQuery) -> Response {
    let from = query
        .as_deref()
        .and_then(|q| q.strip_prefix("from="))
        .and_then(|s| s.parse::<usize>().ok())
        .unwrap_or(0);
    json_of_run(&shared, move |run| series_json(run, from)).await
}

/// A JSON body computed from the shown run off the server's thread, never cached.
async fn json_of_run(
    shared: &Shared,
    body: impl FnOnce(&Output) -> String + Send + 'static,
) -> Response {
    let run = shared.run.clone();
    let json = tokio::task::spawn_blocking(move || body(&read(&run)))
        .await
        .unwrap_or_else(|_| "{}".to_string());
    (
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        json,
    )
        .into_response()
}

/// [`data`]'s body: `{"from", "names", "steps", "scalars": {key: [value|null per step]},
/// "lists": {key: [[value per parameter]|null per step]}}`; non-finite numbers are null.
fn series_json(output: &Output, from: usize) -> String {
    use cockpit_quantities::Value;
    use serde_json::{Map, Value as Json};
    let number = |v: f64| serde_json::Number::from_f64(v).map_or(Json::Null, Json::Number);
    let rows: Vec<_> = output.steps_from(from).collect();
    let steps: Vec<usize> = rows.iter().map(|(step, _)| *step).collect();
    let (mut scalars, mut lists) = (Map::new(), Map::new());
    for (index, (_, values)) in rows.into_iter().enumerate() {
        for (key, value) in values {
            let (table, entry) = match value {
                Value::Float(v) => (&mut scalars, number(*v)),
                Value::Int(v) => (&mut scalars, number(*v as f64)),
                Value::List(v) => (
                    &mut lists,
                    Json::Array(v.iter().map(|x| number(*x)).collect()),
                ),
                Value::Estimate(e) => (
                    &mut lists,
                    Json::Array(e.values.iter().map(|x| number(*x)).collect()),
                ),
                _ => continue,
            };
            let column = table
                .entry(key.clone())
                .or_insert_with(|| Json::Array(vec![Json::Null; steps.len()]));
            if let Json::Array(column) = column {
                column[index] = entry;
            }
        }
    }
    serde_json::json!({
        "from": from,
        "names": output.parameter_names(),
        "steps": steps,
        "scalars": scalars,
        "lists": lists,
    })
    .to_string()
}

/// The latest GradHist1d and GradHist2d of the run (`/hist`), for the page's drawings:
/// `{"GradHist1d": {"step", "edges", "hist"}, "GradHist2d": {"step", "bins", "x_edges",
/// "y_edges", "hist", "individual": [{"hist"} per parameter]}}`, each key absent when the run
/// has none; the last value of each kind (`QuantityKind::last`: histograms may run on their
/// own schedule, and keyed variants count).
async fn hist(State(shared): State<Arc<Shared>>) -> Response {
    json_of_run(&shared, histograms_json).await
}

/// [`hist`]'s body.
fn histograms_json(output: &Output) -> String {
    use cockpit_quantities::Value;
    let mut body = serde_json::Map::new();
    use cockpit_quantities::QuantityKind;
    if let Some((step, Value::Hist1d(h))) = QuantityKind::GradHist1d.last(output) {
        body.insert(
            "GradHist1d".into(),
            serde_json::json!({"step": step, "edges": h.edges, "hist": h.hist}),
        );
    }
    if let Some((step, Value::Hist2d(h))) = QuantityKind::GradHist2d.last(output) {
        let individual: Vec<_> = h
            .individual
            .iter()
            .map(|i| serde_json::json!({"hist": i.hist}))
            .collect();
        body.insert(
            "GradHist2d".into(),
            serde_json::json!({
                "step": step,
                "bins": [h.bins.0, h.bins.1],
                "x_edges": h.x_edges,
                "y_edges": h.y_edges,
                "hist": h.hist,
                "individual": individual,
            }),
        );
    }
    serde_json::Value::Object(body).to_string()
}

/// A file's length and modification time.
type TableStamp = (u64, Option<SystemTime>);

/// The data map of the per-example table beside the log (`cockpit examples --map`), drawn
/// again only when the table changed; 404 while the run has written none.
async fn map(State(shared): State<Arc<Shared>>) -> Response {
    let Some(stamp) = std::fs::metadata(&shared.table)
        .ok()
        .map(|m| (m.len(), m.modified().ok()))
    else {
        return (StatusCode::NOT_FOUND, "no per-example table beside the log").into_response();
    };
    let cached = match shared.map.lock() {
        Ok(cache) => cache
            .as_ref()
            .filter(|(at, _)| *at == stamp)
            .map(|(_, png)| png.clone()),
        Err(_) => None,
    };
    if let Some(png) = cached {
        return png_response(png.as_ref().clone());
    }
    let (table, reader) = (shared.table.clone(), shared.reader);
    let drawn = tokio::task::spawn_blocking(move || {
        let rows = cockpit_quantities::examples::read_table_with(&reader, &table)
            .map_err(|err| ErrorChain(&err).to_string())?;
        cockpit_plot::render_map_png(&rows, &cockpit_plot::MapOptions::default())
            .map(|(png, _)| png)
            .map_err(|err| ErrorChain(&err).to_string())
    })
    .await;
    match drawn {
        Ok(Ok(png)) => {
            let png = Arc::new(png);
            if let Ok(mut cache) = shared.map.lock() {
                *cache = Some((stamp, png.clone()));
            }
            png_response(png.as_ref().clone())
        }
        Ok(Err(err)) => (StatusCode::SERVICE_UNAVAILABLE, err).into_response(),
        Err(err) => (StatusCode::SERVICE_UNAVAILABLE, err.to_string()).into_response(),
    }
}

/// uPlot (MIT, vendored: `assets/uplot/README.md`), compiled into the binary.
async fn uplot_js() -> Response {
    static_asset(
        "text/javascript",
        include_str!("../assets/uplot/uPlot.iife.min.js"),
    )
}

async fn uplot_css() -> Response {
    static_asset("text/css", include_str!("../assets/uplot/uPlot.min.css"))
}

fn static_asset(kind: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        body,
    )
        .into_response()
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
{{STYLE}}
  header { display: flex; gap: 2em; align-items: baseline; }
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
{{SHOW}}
</script>
</body>
</html>
"#;

/// Both pages' common style.
const STYLE: &str =
    "  body { font-family: sans-serif; margin: 1em; background: #fafafa; color: #222; }
  h1 { font-size: 1.3em; margin: 0; }
  #step { font-weight: bold; }
  #problem { color: #a33; }
  img { display: block; width: 100%; max-width: 1600px; margin: 0.8em 0; background: #fff; }
  #verdict { font-size: 1.1em; padding: 0.6em; background: #fff; border-left: 4px solid #37c; }";

/// Both pages' script: the state of each event shown (the step, the problem, the verdict),
/// the images reloaded, and the page's own `window.onStep` called once the log has a step.
const SHOW: &str = r#"  const show = (state) => {
    document.getElementById("step").textContent =
      state.last_step === null ? "no tracked step yet" : "last step seen: " + state.last_step;
    document.getElementById("problem").textContent = state.problem ? state.problem : "";
    document.getElementById("verdict").textContent = "diagnosis: " + state.verdict;
    if (state.last_step !== null) {
      if (window.onStep) window.onStep(state);
      for (const id of ["primary", "secondary"]) {
        const src = "/" + id + ".png?v=" + state.version;
        const image = document.getElementById(id);
        if (image.getAttribute("src") !== src) image.src = src;
      }
    }
  };
  const events = new EventSource("/events");
  events.onmessage = (message) => show(JSON.parse(message.data));"#;

/// The live page: the line instruments as interactive charts (uPlot: the value under the
/// pointer in each chart's legend, drag to zoom on the step axis, the wheel to pan,
/// double-click to reset; a parameter picker for the per-layer lists), updated from `/data`
/// after each event with what was appended; Alpha's parabola, the gradient tests' gauge and
/// the last histograms drawn on canvases (`/hist`); the two screens' images and the data map
/// under them. `/?static` is the page of images alone.
const LIVE_PAGE: &str = r##"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Cockpit: {{LOG}}</title>
<link rel="stylesheet" href="/uplot.css">
<style>
{{STYLE}}
  header { display: flex; gap: 2em; align-items: baseline; flex-wrap: wrap; }
  #charts, #drawings { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr)); gap: 0.6em; margin: 0.8em 0; }
  .chart { background: #fff; padding: 0.3em; }
  .chart h2 { font-size: 0.95em; margin: 0.2em 0.4em; }
  .hint { color: #666; font-size: 0.85em; }
</style>
</head>
<body>
<header>
  <h1>Cockpit: {{LOG}}</h1>
  <span id="step">{{STEP}}</span>
  <label>parameter <select id="layer"><option value="all">all</option></select></label>
  <span class="hint">drag: zoom the steps · wheel: pan · double-click: all steps · <a href="/?static">images only</a></span>
  <span id="problem">{{PROBLEM}}</span>
</header>
<p id="verdict">diagnosis: {{VERDICT}}</p>
<div id="charts"></div>
<div id="drawings">
  <div class="chart"><h2>Alpha: where the steps land on the parabola</h2><canvas id="alpha" width="430" height="260"></canvas></div>
  <div class="chart"><h2>Gradient tests (the last step)</h2><canvas id="tests" width="430" height="260"></canvas><div id="tests-caption" class="hint"></div></div>
  <div class="chart"><h2 id="hist1d-title">Gradient elements (GradHist1d)</h2><canvas id="hist1d" width="430" height="260"></canvas></div>
  <div class="chart"><h2 id="hist2d-title">Gradients against parameters (GradHist2d)</h2><canvas id="hist2d" width="430" height="260"></canvas></div>
</div>
<img id="primary" src="{{PRIMARY}}" alt="the primary screen (drawn once the log has a tracked step)">
<img id="secondary" src="{{SECONDARY}}" alt="the secondary screen">
<img id="map" src="/map.png" alt="the data map (once the run has written its per-example table)" onerror="this.style.display='none'" onload="this.style.display='block'">
<script src="/uplot.js"></script>
<script>
  // Cockpit's order first (the primary screen's columns, then the rest as they come).
  const ORDER = ["Loss", "Alpha", "Distance", "UpdateSize", "GradNorm", "NormTest", "InnerTest",
    "OrthoTest", "HessMaxEV", "HessTrace", "TICDiag", "TICTrace", "MeanGSNR", "CABS",
    "EarlyStopping", "GradParamRatio", "learning_rate", "train_accuracy", "valid_accuracy"];
  // Log-like axes where the dashboard has them (signed values: asinh).
  const LOG = new Set(["NormTest", "InnerTest", "OrthoTest", "HessMaxEV"]);
  const COLOURS = ["#4a73ad", "#f28033", "#339966", "#c0392b", "#6c3483", "#17a2b8", "#7f8c8d", "#b7950b"];
  const store = { steps: [], names: [], scalars: {}, lists: {} };
  const charts = {};
  let layer = "all";
  // What the page holds, for tools and the browser test.
  window.cockpit = { store, charts };

  const merge = (d) => {
    store.names = d.names;
    const keep = store.steps.findIndex((s) => s >= d.from);
    const cut = keep < 0 ? store.steps.length : keep;
    store.steps.length = cut;
    for (const table of ["scalars", "lists"]) {
      for (const key of Object.keys(store[table])) store[table][key].length = cut;
      for (const [key, column] of Object.entries(d[table])) {
        const mine = store[table][key] || (store[table][key] = new Array(cut).fill(null));
        mine.length = cut;
        mine.push(...column);
      }
      for (const key of Object.keys(store[table])) {
        const mine = store[table][key];
        while (mine.length < cut + d.steps.length) mine.push(null);
      }
    }
    store.steps.push(...d.steps);
  };

  // The parameters' names (the log's, else their positions), as wide as the widest list.
  const layerNames = () => {
    let width = 0;
    for (const rows of Object.values(store.lists)) {
      for (const r of rows) if (r) width = Math.max(width, r.length);
    }
    return Array.from({ length: width }, (_, i) => store.names[i] || "parameter " + i);
  };

  const seriesOf = (key) => {
    if (key in store.scalars) return { labels: [key], columns: [store.scalars[key]] };
    const rows = store.lists[key];
    const names = layerNames();
    const chosen = layer === "all" ? names.map((_, i) => i) : [names.indexOf(layer)].filter((i) => i >= 0);
    return {
      labels: chosen.map((i) => names[i]),
      columns: chosen.map((i) => rows.map((r) => (r && r[i] !== undefined ? r[i] : null))),
    };
  };

  const wheelPan = (u) => {
    u.over.addEventListener("wheel", (e) => {
      e.preventDefault();
      const { min, max } = u.scales.x;
      const shift = (max - min) * 0.1 * Math.sign(e.deltaY);
      u.zoomed = true;
      u.setScale("x", { min: min + shift, max: max + shift });
    }, { passive: false });
    u.over.addEventListener("dblclick", () => { u.zoomed = false; });
  };

  const draw = (key) => {
    const { labels, columns } = seriesOf(key);
    const data = [store.steps, ...columns];
    const chart = charts[key];
    const shape = labels.join("|");
    if (chart && chart.shape === shape) {
      chart.plot.setData(data, !chart.plot.zoomed);
      return;
    }
    let box = document.getElementById("chart-" + key);
    if (!box) {
      box = document.createElement("div");
      box.className = "chart";
      box.id = "chart-" + key;
      box.dataset.key = key;
      const title = document.createElement("h2");
      title.textContent = key;
      box.appendChild(title);
      document.getElementById("charts").appendChild(box);
    }
    if (chart) { chart.plot.destroy(); }
    const plot = new uPlot({
      width: 430, height: 220,
      scales: { x: { time: false }, y: LOG.has(key) ? { distr: 4, asinh: 1e-3 } : {} },
      series: [{ label: "step" }, ...labels.map((label, i) => ({
        label, stroke: COLOURS[i % COLOURS.length], width: 1.5, spanGaps: true, points: { show: false },
      }))],
      cursor: { drag: { x: true, y: false, setScale: true } },
      hooks: { ready: [wheelPan], setSelect: [(u) => { if (u.select.width > 0) u.zoomed = true; }] },
    }, data, box);
    charts[key] = { plot, shape };
  };

  const redraw = () => {
    const keys = [...Object.keys(store.scalars), ...Object.keys(store.lists)];
    keys.sort((a, b) => {
      const [i, j] = [ORDER.indexOf(a), ORDER.indexOf(b)];
      return (i < 0 ? 99 : i) - (j < 0 ? 99 : j) || a.localeCompare(b);
    });
    for (const key of keys) draw(key);
    const picker = document.getElementById("layer");
    const known = new Set([...picker.options].map((o) => o.value));
    for (const name of layerNames()) {
      if (!known.has(name)) picker.add(new Option(name, name));
    }
  };

  let pulling = Promise.resolve();
  const pull = () => {
    pulling = pulling.then(async () => {
      const from = store.steps.length ? store.steps[store.steps.length - 1] : 0;
      const response = await fetch("/data?from=" + from);
      if (!response.ok) return;
      merge(await response.json());
      redraw();
    }).catch(() => {});
    return pulling;
  };

  document.getElementById("layer").addEventListener("change", (e) => {
    layer = e.target.value;
    for (const key of Object.keys(store.lists)) draw(key);
    drawHistograms().catch(() => {});
  });

  // The drawings: canvases in the dashboard's colours.
  const canvas = (id) => {
    const c = document.getElementById(id);
    const g = c.getContext("2d");
    g.clearRect(0, 0, c.width, c.height);
    g.fillStyle = "#eaeaf2";
    g.fillRect(40, 10, c.width - 50, c.height - 40);
    return { g, x0: 40, y0: 10, w: c.width - 50, h: c.height - 40 };
  };
  const axisText = (g, text, x, y) => { g.fillStyle = "#262626"; g.font = "11px sans-serif"; g.fillText(text, x, y); };

  // Alpha: the share of steps per α bin on [-1.5, 1.5] (all steps grey, the last 10 % blue)
  // under the parabola of the local quadratic (α = ±1: the loss as high as where it started).
  const drawAlpha = () => {
    const alpha = (store.scalars.Alpha || []).filter((v) => v !== null);
    const { g, x0, y0, w, h } = canvas("alpha");
    const bins = 30, lo = -1.5, hi = 1.5;
    const share = (values) => {
      const counts = new Array(bins).fill(0);
      for (const v of values) counts[Math.min(bins - 1, Math.max(0, Math.floor((v - lo) / (hi - lo) * bins)))] += 1;
      return counts.map((c) => c / Math.max(1, values.length));
    };
    const all = share(alpha), last = share(alpha.slice(Math.floor(alpha.length * 0.9)));
    const top = Math.max(0.25, ...all, ...last);
    const X = (v) => x0 + (v - lo) / (hi - lo) * w, Y = (v) => y0 + h - v / top * h;
    const bar = w / bins;
    all.forEach((v, i) => { g.fillStyle = "rgba(153,153,153,0.8)"; g.fillRect(x0 + i * bar, Y(v), bar * 0.5, y0 + h - Y(v)); });
    last.forEach((v, i) => { g.fillStyle = "#4a73ad"; g.fillRect(x0 + i * bar + bar * 0.5, Y(v), bar * 0.5, y0 + h - Y(v)); });
    g.strokeStyle = "#262626"; g.beginPath();
    for (let i = 0; i <= 60; i++) { const a = lo + (hi - lo) * i / 60; const y = Y(top * a * a / (hi * hi)); i ? g.lineTo(X(a), y) : g.moveTo(X(a), y); }
    g.stroke();
    for (const t of [-1, 0, 1]) axisText(g, String(t), X(t) - 4, y0 + h + 14);
    axisText(g, "local step length α (" + alpha.length + " steps; grey all, blue the last 10 %)", x0, y0 + h + 28);
  };

  // The gradient tests: matplotlib's symlog (linear within ±0.1) on ±2, the norm test's
  // circle, the inner test's horizontal band and the orthogonality test's vertical band.
  const drawTests = () => {
    const last = (key) => { const c = store.scalars[key] || []; for (let i = c.length - 1; i >= 0; i--) if (c[i] !== null) return c[i]; return null; };
    const symlog = (x) => { const a = Math.abs(x); return Math.sign(x) * (a <= 0.1 ? a / 0.1 : 1 + Math.log10(a / 0.1)); };
    const { g, x0, y0, w, h } = canvas("tests");
    const s = symlog(2), side = Math.min(w, h);
    const cx = x0 + w / 2, cy = y0 + h / 2, unit = side / 2 / s;
    const [norm, inner, ortho] = [last("NormTest"), last("InnerTest"), last("OrthoTest")];
    if (inner > 0) { const y = Math.min(symlog(inner), s) * unit; g.fillStyle = "rgba(242,128,51,0.3)"; g.fillRect(cx - s * unit, cy - y, 2 * s * unit, 2 * y); }
    if (ortho > 0) { const x = Math.min(symlog(ortho), s) * unit; g.fillStyle = "rgba(51,153,102,0.3)"; g.fillRect(cx - x, cy - s * unit, 2 * x, 2 * s * unit); }
    if (norm > 0) {
      g.beginPath();
      for (let i = 0; i <= 180; i++) { const t = 2 * Math.PI * i / 180; const x = cx + symlog(norm * Math.cos(t)) * unit, y = cy - symlog(norm * Math.sin(t)) * unit; i ? g.lineTo(x, y) : g.moveTo(x, y); }
      g.fillStyle = "rgba(74,115,173,0.3)"; g.fill(); g.strokeStyle = "#4a73ad"; g.lineWidth = 2; g.stroke(); g.lineWidth = 1;
    }
    g.strokeStyle = "#262626"; g.beginPath(); g.moveTo(cx - 6, cy - 6); g.lineTo(cx + 6, cy + 6); g.moveTo(cx + 6, cy - 6); g.lineTo(cx - 6, cy + 6); g.stroke();
    const fmt = (v) => (v === null ? "–" : v.toPrecision(3));
    axisText(g, "orthogonal →, parallel ↑", x0, y0 + h + 28);
    document.getElementById("tests-caption").textContent =
      "norm " + fmt(norm) + " · inner " + fmt(inner) + " · ortho " + fmt(ortho);
  };

  // GradHist1d: log10 of the counts per bin; GradHist2d: log10(count + 1) as a heat map of
  // the chosen parameter (the picker) or of all of them.
  const drawHistograms = async () => {
    const response = await fetch("/hist");
    if (!response.ok) return;
    const d = await response.json();
    const h1 = d.GradHist1d;
    if (h1) {
      const { g, x0, y0, w, h } = canvas("hist1d");
      const logs = h1.hist.map((c) => (c >= 1 ? Math.log10(c) : 0));
      const top = Math.max(1, ...logs), bar = w / logs.length;
      g.fillStyle = "#f28033";
      logs.forEach((v, i) => g.fillRect(x0 + i * bar, y0 + h - v / top * h, Math.max(1, bar - 1), v / top * h));
      axisText(g, h1.edges[0].toPrecision(2), x0, y0 + h + 14);
      axisText(g, h1.edges[h1.edges.length - 1].toPrecision(2), x0 + w - 30, y0 + h + 14);
      document.getElementById("hist1d-title").textContent = "Gradient elements (GradHist1d, step " + h1.step + ", log10 counts)";
    }
    const h2 = d.GradHist2d;
    if (h2) {
      const names = layerNames();
      const index = layer === "all" ? -1 : names.indexOf(layer);
      const counts = index >= 0 && h2.individual[index] ? h2.individual[index].hist : h2.hist;
      const [xb, yb] = h2.bins;
      const { g, x0, y0, w, h } = canvas("hist2d");
      const logs = counts.map((c) => Math.log10(Math.max(0, c) + 1));
      const top = Math.max(1e-9, ...logs);
      for (let i = 0; i < xb; i++) for (let j = 0; j < yb; j++) {
        const t = logs[i * yb + j] / top;
        g.fillStyle = "rgba(68,1,84," + t.toFixed(3) + ")";
        g.fillRect(x0 + i * w / xb, y0 + h - (j + 1) * h / yb, w / xb + 0.5, h / yb + 0.5);
      }
      axisText(g, "gradient element →, parameter value ↑", x0, y0 + h + 28);
      document.getElementById("hist2d-title").textContent = "Gradients against parameters (GradHist2d, step " + h2.step + ", " + (index >= 0 && h2.individual[index] ? names[index] : "all parameters") + ")";
    }
  };

  const drawAll = () => { drawAlpha(); drawTests(); drawHistograms().catch(() => {}); };

  window.onStep = (state) => {
    pull().then(drawAll);
    document.getElementById("map").src = "/map.png?v=" + state.version;
  };
{{SHOW}}
</script>
</body>
</html>
"##;
