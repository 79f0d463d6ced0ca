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
    let mut child = Command::new(env!("CARGO_BIN_EXE_cockpit"))
        .arg("serve")
        .args(args)
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
