//! `cockpit serve` end to end: the binary on port 0, spoken to over plain TCP.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cockpit_quantities::log::JsonLinesWriter;
use cockpit_quantities::{Output, Value};

/// The server, killed when dropped.
struct Server {
    child: Child,
    address: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(args: &[&str]) -> (Server, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_cockpit"));
    command.arg("serve").args(args);
    start_command(command)
}

fn start_command(mut command: Command) -> (Server, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .trim()
        .rsplit("http://")
        .next()
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    (Server { child, address }, line)
}

/// One raw HTTP/1.1 request (the target written exactly as given): status and body.
fn get(address: &str, target: &str) -> (u16, Vec<u8>) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "GET {target} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end: {}", String::from_utf8_lossy(&response)));
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, response[split + 4..].to_vec())
}

fn step(output: &mut Output, step: usize) {
    output.insert(step, "Loss", Value::Float(2.0 / (step as f64 + 1.0)));
    output.insert(step, "GradNorm", Value::List(vec![1.0, 0.5 + step as f64]));
}

/// Reads server-sent events until one holds `needle`, or fails after 30 s.
fn await_event(reader: &mut BufReader<TcpStream>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            continue;
        }
        if line.starts_with("data:") && line.contains(needle) {
            return line;
        }
    }
    panic!("no event with {needle} within 30 s");
}

#[test]
fn the_page_its_images_and_a_live_update() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let mut writer = JsonLinesWriter::create(&log).unwrap();
    for s in 0..3 {
        let mut output = Output::new();
        step(&mut output, s);
        writer.append(s, &output).unwrap();
    }
    let (server, line) = start(&[log.to_str().unwrap(), "--port", "0", "--interval-ms", "50"]);
    assert!(line.contains("127.0.0.1:"), "{line}");
    let address = server.address.clone();

    let (status, page) = get(&address, "/");
    let page = String::from_utf8(page).unwrap();
    assert_eq!(status, 200);
    assert!(
        page.contains("EventSource(\"/events\")") && page.contains("run.jsonl"),
        "{page}"
    );
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from elsewhere"
    );

    // The events: the state now, then one more when a step is appended.
    let mut events = TcpStream::connect(&address).unwrap();
    events
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    write!(
        events,
        "GET /events HTTP/1.1\r\nHost: {address}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut events = BufReader::new(events);
    let first = await_event(&mut events, "\"last_step\":2");
    assert!(first.contains("nothing flagged"), "{first}");

    for screen in ["/primary.png", "/secondary.png", "/primary.png?v=1"] {
        let (status, png) = get(&address, screen);
        assert_eq!(status, 200, "{screen}");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{screen} is a PNG");
    }

    let mut output = Output::new();
    step(&mut output, 3);
    writer.append(3, &output).unwrap();
    await_event(&mut events, "\"last_step\":3");
    let (_, state) = get(&address, "/state");
    assert!(String::from_utf8_lossy(&state).contains("\"last_step\":3"));
}

/// Only the fixed routes answer: paths that climb out, absolute paths and encoded dots get
/// 404 and nothing else, even where the file they name exists.
#[test]
fn no_path_from_a_request_reaches_the_file_system() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let mut writer = JsonLinesWriter::create(&log).unwrap();
    let mut output = Output::new();
    step(&mut output, 0);
    writer.append(0, &output).unwrap();
    std::fs::write(dir.path().join("secret.txt"), "do not serve").unwrap();
    let (server, _) = start(&[log.to_str().unwrap(), "--port", "0"]);
    let manifest = env!("CARGO_MANIFEST_DIR");
    for target in [
        "/../Cargo.toml".to_string(),
        "/../../Cargo.toml".to_string(),
        "/%2e%2e/Cargo.toml".to_string(),
        "/%2E%2E%2F%2E%2E%2FCargo.toml".to_string(),
        "/..%2fsecret.txt".to_string(),
        "/secret.txt".to_string(),
        "/run.jsonl".to_string(),
        "//etc/passwd".to_string(),
        format!("{manifest}/Cargo.toml"),
        "/primary.png/../../Cargo.toml".to_string(),
        "/static/..%5c..%5cCargo.toml".to_string(),
        "/%00".to_string(),
    ] {
        let (status, body) = get(&server.address, &target);
        assert_eq!(status, 404, "{target}");
        assert_eq!(body, b"not found", "{target}");
    }
}

/// Binding beyond this machine works and says who can read the dashboard.
#[test]
fn binding_elsewhere_warns() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let (mut server, line) = start(&[log.to_str().unwrap(), "--port", "0", "--bind", "0.0.0.0"]);
    assert!(line.contains("0.0.0.0:"), "{line}");
    let _ = server.child.kill();
    let mut stderr = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("reachable from other machines"), "{stderr}");
}

/// Waits until `/state` holds `needle`, or fails after 30 s; returns the state.
fn await_state(address: &str, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let (_, body) = get(address, "/state");
        let state = String::from_utf8_lossy(&body).to_string();
        if state.contains(needle) {
            return state;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("/state never held {needle}");
}

/// A stream of `steps` steps at `path`, written afresh.
fn write_steps(path: &std::path::Path, steps: usize) {
    let _ = std::fs::remove_file(path);
    let mut writer = JsonLinesWriter::create(path).unwrap();
    for s in 0..steps {
        let mut output = Output::new();
        step(&mut output, s);
        writer.append(s, &output).unwrap();
    }
}

/// SIGINT with a page's event stream open: the stream ends and the server exits within a
/// few seconds (it waited for the client to leave before).
#[cfg(unix)]
#[test]
fn ctrl_c_stops_the_server_with_a_page_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 3);
    let (mut server, _) = start(&[log.to_str().unwrap(), "--port", "0", "--interval-ms", "50"]);
    let address = server.address.clone();
    let mut events = TcpStream::connect(&address).unwrap();
    write!(events, "GET /events HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
    events
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut reader = BufReader::new(events);
    await_event(&mut reader, "\"last_step\":2");
    let pid = server.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(status) = server.child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("still serving 5 s after SIGINT with an event stream open");
}

/// Hundreds of connections that never finish their request do not keep a real one out, even
/// when they outnumber the descriptors the server may open (256 here: without the cap on
/// half-open connections they would take them all, and the request would wait forever).
#[cfg(unix)]
#[test]
fn a_request_is_answered_under_a_flood_of_half_open_connections() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 2);
    let mut command = Command::new("sh");
    command.args([
        "-c",
        &format!(
            "ulimit -n 256 && exec {} serve {} --port 0",
            env!("CARGO_BIN_EXE_cockpit"),
            log.display()
        ),
    ]);
    let (server, _) = start_command(command);
    let address = server.address.clone();
    let mut flood = Vec::new();
    for _ in 0..400 {
        let Ok(mut stream) = TcpStream::connect(&address) else {
            continue;
        };
        let _ = write!(stream, "GET / HTTP/1.1\r\nHost: {address}\r\nX-Slow: ");
        flood.push(stream);
    }
    let started = Instant::now();
    let (status, body) = get(&address, "/state");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(flood);
}

/// A request for another host (a DNS-rebinding page) is refused; the server's own names work.
#[test]
fn the_host_header_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 2);
    let (server, _) = start(&[log.to_str().unwrap(), "--port", "0"]);
    let address = server.address.clone();
    let port = address.rsplit(':').next().unwrap().to_string();
    let ask = |host: &str| {
        let mut stream = TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(
            stream,
            "GET /state HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        response
    };
    assert!(
        ask("evil.example").starts_with("HTTP/1.1 421"),
        "{}",
        ask("evil.example")
    );
    assert!(ask(&format!("evil.example:{port}")).starts_with("HTTP/1.1 421"));
    assert!(ask(&format!("localhost:{port}")).starts_with("HTTP/1.1 200"));
    assert!(ask(&address).starts_with("HTTP/1.1 200"));
}

/// Eight clients asking for the same image at once get it from one drawing.
#[test]
fn an_image_is_drawn_once_for_every_client() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 4);
    let (server, _) = start(&[log.to_str().unwrap(), "--port", "0", "--size", "600x300"]);
    let address = server.address.clone();
    await_state(&address, "\"last_step\":3");
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let address = address.clone();
            std::thread::spawn(move || get(&address, "/primary.png"))
        })
        .collect();
    for client in clients {
        let (status, png) = client.join().unwrap();
        assert_eq!(status, 200);
        assert!(png.starts_with(b"\x89PNG"));
    }
    let state = await_state(&address, "\"drawn\"");
    assert!(state.contains("\"drawn\":1"), "{state}");
}

/// A log cut or rewritten in place keeps the last good run on the page, with the problem.
#[test]
fn a_log_that_goes_back_keeps_the_last_good_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 6);
    let (server, _) = start(&[log.to_str().unwrap(), "--port", "0", "--interval-ms", "50"]);
    let address = server.address.clone();
    await_state(&address, "\"last_step\":5");
    write_steps(&log, 2);
    let state = await_state(&address, "went back");
    assert!(state.contains("\"last_step\":5"), "{state}");
    std::fs::write(&log, "").unwrap();
    let state = await_state(&address, "to no step");
    assert!(state.contains("\"last_step\":5"), "{state}");
}

/// Random clients: connections that send random bytes, half a request, a request with random
/// methods, paths and headers, or nothing, and close at random points, in a random order
/// (a seeded generator; `SERVE_FUZZ_ROUNDS` for longer runs). The server stays up and answers
/// a normal request after each round.
#[test]
fn random_clients_do_not_bring_the_server_down() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 3);
    let (mut server, _) = start(&[log.to_str().unwrap(), "--port", "0", "--size", "600x300"]);
    let address = server.address.clone();
    let mut state: u64 = std::env::var("SERVE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let rounds: usize = std::env::var("SERVE_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let methods = ["GET", "POST", "HEAD", "DELETE", "OPTIONS", "G\0T", ""];
    let targets = [
        "/",
        "/state",
        "/events",
        "/primary.png",
        "/secondary.png",
        "/../x",
        "*",
        "/%00",
        "",
    ];
    for _ in 0..rounds {
        let mut open = Vec::new();
        for _ in 0..60 {
            let Ok(mut stream) = TcpStream::connect(&address) else {
                continue;
            };
            stream
                .set_write_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let bytes: Vec<u8> = match next() % 5 {
                0 => (0..next() % 2000).map(|_| next() as u8).collect(),
                1 => format!(
                    "{} {} HTTP/1.1\r\nHost: {address}\r\n",
                    methods[next() as usize % methods.len()],
                    targets[next() as usize % targets.len()]
                )
                .into_bytes(),
                2 => format!(
                    "{} {} HTTP/1.{}\r\nHost: {}\r\nContent-Length: {}\r\n\r\n",
                    methods[next() as usize % methods.len()],
                    targets[next() as usize % targets.len()],
                    next() % 3,
                    if next() % 2 == 0 {
                        address.clone()
                    } else {
                        "x".repeat((next() % 9000) as usize)
                    },
                    next() % 100_000
                )
                .into_bytes(),
                3 => format!(
                    "GET / HTTP/1.1\r\nHost: {address}\r\n{}: y\r\n\r\n",
                    "h".repeat((next() % 100_000) as usize)
                )
                .into_bytes(),
                _ => Vec::new(),
            };
            let _ = stream.write_all(&bytes);
            if next() % 2 == 0 {
                open.push(stream); // left open (half-sent or waiting)
            }
        }
        // Close the kept ones in a random order.
        while !open.is_empty() {
            let index = next() as usize % open.len();
            drop(open.swap_remove(index));
        }
        assert!(
            server.child.try_wait().unwrap().is_none(),
            "the server exited"
        );
        let (status, _) = get(&address, "/state");
        assert_eq!(status, 200);
    }
}

/// Garbage appended to a stream (complete lines that are not JSON) does not make the run
/// disappear, even for a server started after it: the good lines are shown with the problem.
#[test]
fn garbage_after_a_stream_keeps_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    write_steps(&log, 5);
    let mut garbage = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    for _ in 0..100 {
        writeln!(garbage, "{}", "\u{1}not json ".repeat(100)).unwrap();
    }
    drop(garbage);
    let (server, _) = start(&[log.to_str().unwrap(), "--port", "0", "--interval-ms", "50"]);
    let address = server.address.clone();
    let state = await_state(&address, "\"last_step\":4");
    assert!(state.contains("showing the lines before it"), "{state}");
    assert!(
        state.len() < 2000,
        "the garbage is not quoted: {} bytes",
        state.len()
    );
}

/// `/data?from=S`: the steps from S on with the log's values (a per-layer list as one column
/// per parameter); the charts' script is served from the binary; `/?static` is the page of
/// images without it.
#[test]
fn data_holds_the_appended_steps_and_the_chart_script_is_local() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let mut writer = JsonLinesWriter::create(&log).unwrap();
    for s in 0..5 {
        let mut output = Output::new();
        step(&mut output, s);
        writer.append(s, &output).unwrap();
    }
    let (server, _) = start(&[log.to_str().unwrap(), "--port", "0", "--interval-ms", "50"]);
    let address = server.address.clone();
    await_state(&address, "\"last_step\":4");
    let (status, body) = get(&address, "/data?from=3");
    assert_eq!(status, 200);
    let data: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(data["steps"], serde_json::json!([3, 4]));
    for (row, s) in [(0, 3), (1, 4)] {
        let loss = data["scalars"]["Loss"][row].as_f64().unwrap();
        assert!((loss - 2.0 / (s as f64 + 1.0)).abs() < 1e-12, "{data}");
        let norms = &data["lists"]["GradNorm"][row];
        assert_eq!(norms[1].as_f64().unwrap(), 0.5 + s as f64, "{data}");
    }
    let (_, all) = get(&address, "/data");
    let all: serde_json::Value = serde_json::from_slice(&all).unwrap();
    assert_eq!(all["steps"].as_array().unwrap().len(), 5);
    let (status, script) = get(&address, "/uplot.js");
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&script).contains("uPlot"));
    let (_, live) = get(&address, "/");
    let live = String::from_utf8(live).unwrap();
    assert!(live.contains("src=\"/uplot.js\"") && live.contains("/data?from="));
    let (_, images) = get(&address, "/?static");
    let images = String::from_utf8(images).unwrap();
    assert!(!images.contains("uplot") && images.contains("primary.png"));
    // The latest histogram for the page's drawings.
    let (_, none) = get(&address, "/hist");
    assert_eq!(String::from_utf8_lossy(&none), "{}");
    let mut output = Output::new();
    output.insert(
        5,
        "GradHist1d",
        Value::Hist1d(cockpit_quantities::Histogram1d {
            hist: vec![1.0, 2.0],
            edges: vec![-1.0, 0.0, 1.0],
        }),
    );
    step(&mut output, 5);
    writer.append(5, &output).unwrap();
    await_state(&address, "\"last_step\":5");
    let (_, hist) = get(&address, "/hist");
    let hist: serde_json::Value = serde_json::from_slice(&hist).unwrap();
    assert_eq!(hist["GradHist1d"]["step"], 5, "{hist}");
    assert_eq!(
        hist["GradHist1d"]["hist"],
        serde_json::json!([1.0, 2.0]),
        "{hist}"
    );
    // The data map: none before the run writes its per-example table, then drawn from it.
    let (status, _) = get(&address, "/map.png");
    assert_eq!(status, 404);
    let mut record = cockpit_quantities::examples::ExampleRecord::new(8, 0.7);
    for s in 0..3 {
        let visits: Vec<_> = (0..6)
            .map(|id| cockpit_quantities::examples::Visit {
                id,
                step: s,
                loss: 0.3 * id as f64,
                grad_norm: 1.0,
                relative_share: 1.0,
                margin: Some(1.0),
                worst: None,
            })
            .collect();
        record.fold(&visits);
    }
    cockpit_quantities::examples::write_table(dir.path().join("run.examples.csv"), &record)
        .unwrap();
    let (status, png) = get(&address, "/map.png");
    assert_eq!(status, 200);
    assert!(png.starts_with(b"\x89PNG"));
}
