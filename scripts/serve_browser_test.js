// `cockpit serve` in a real browser (headless Chromium driven by playwright-core): the page's
// charts show the log's values, update when steps are appended, show the value under the
// pointer, switch layers with the parameter picker, and nothing leaves loopback.
//
//   node scripts/serve_browser_test.js COCKPIT_BINARY
//
// Writes its own JSON-lines log, starts the server on a free port, and exits non-zero with
// the reason on the first check that fails (status 3: Chromium cannot be launched here). Run
// by `.ci/run` where Chromium and playwright-core install (skipped with a message elsewhere).
const { chromium } = require("playwright-core");
const { spawn } = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");

const fail = (why) => { console.error("FAIL: " + why); process.exit(1); };
const check = (ok, why) => { if (!ok) fail(why); };

// The values of step s, as the stream writes them.
const loss = (s) => 2 / (s + 1);
const norms = (s) => [1 + 0.1 * s, 0.5 + 0.01 * s];
const array = (values) => ({ __ndarray__: values, dtype: "float64", shape: [values.length] });
const line = (s) => {
  const entry = {
    Loss: loss(s), GradNorm: norms(s), Alpha: Math.sin(s), NormTest: 0.5, InnerTest: 0.2,
    OrthoTest: 0.1 + 0.01 * s,
    GradHist1d: { edges: array([-1, -0.5, 0, 0.5, 1]), hist: array([1, 10, 100 + s, 10]) },
  };
  if (s === 0) entry.parameter_names = ["fc1.weight", "fc2.weight"];
  return JSON.stringify({ output: { [String(s)]: entry }, tracked_at: s }) + "\n";
};

(async () => {
  const binary = process.argv[2];
  check(binary && fs.existsSync(binary), "usage: serve_browser_test.js COCKPIT_BINARY");
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cockpit-browser-"));
  const log = path.join(dir, "run.jsonl");
  for (let s = 0; s < 20; s++) fs.appendFileSync(log, line(s));
  const server = spawn(binary, ["serve", log, "--port", "0", "--interval-ms", "100"]);
  const address = await new Promise((resolve, reject) => {
    let out = "";
    server.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) resolve(m[1]);
    });
    server.on("exit", (code) => reject(new Error("the server exited: " + code)));
    setTimeout(() => reject(new Error("no address within 30 s: " + out)), 30000);
  });
  let browser;
  try {
    browser = await chromium.launch({
      executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
  } catch (e) {
    // The machine cannot run a browser at all: not a failure of the page (exit status 3).
    console.error("cannot launch Chromium here: " + e.message);
    server.kill("SIGINT");
    process.exit(3);
  }
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1200 } });
    const outside = [];
    page.on("request", (r) => {
      const host = new URL(r.url()).hostname;
      if (host !== "127.0.0.1") outside.push(r.url());
    });
    await page.goto(address + "/");
    // The charts hold the log's values: the Loss chart's data at several steps.
    await page.waitForFunction(() => document.querySelectorAll("#charts .uplot").length >= 2, null, { timeout: 30000 });
    const values = async (key) => page.evaluate((k) => {
      const steps = window.cockpit.store.steps;
      const column = k in window.cockpit.store.scalars ? window.cockpit.store.scalars[k] : null;
      return { steps: steps.slice(), column: column ? column.slice() : null };
    }, key);
    let seen = await values("Loss");
    check(seen.steps.length === 20, "20 steps on the page: " + seen.steps.length);
    for (const s of [0, 7, 19]) {
      check(Math.abs(seen.column[s] - loss(s)) < 1e-12, `Loss at step ${s}: ${seen.column[s]}`);
    }
    // Appended steps arrive without a reload.
    for (let s = 20; s < 25; s++) fs.appendFileSync(log, line(s));
    await page.waitForFunction(() => window.cockpit.store.steps.length === 25, null, { timeout: 30000 });
    seen = await values("Loss");
    check(Math.abs(seen.column[24] - loss(24)) < 1e-12, "Loss at step 24 after the append");
    // Hovering shows the value at that step in the chart's legend.
    const box = await page.locator("#chart-Loss .u-over").boundingBox();
    await page.mouse.move(box.x + box.width - 1, box.y + box.height / 2);
    const hovered = await page.locator("#chart-Loss .u-legend .u-series").nth(1).locator(".u-value").textContent();
    check(Math.abs(parseFloat(hovered) - loss(24)) < 1e-3, "the value under the pointer: " + hovered);
    // The parameter picker switches the per-layer chart to one layer.
    const labels = () => page.locator("#chart-GradNorm .u-legend .u-series .u-label").allTextContents();
    let before = await labels();
    check(before.includes("fc1.weight") && before.includes("fc2.weight"), "both layers: " + before);
    await page.selectOption("#layer", "fc2.weight");
    await page.waitForFunction(() => !document.querySelector("#chart-GradNorm").textContent.includes("fc1.weight"));
    const after = await labels();
    check(after.includes("fc2.weight") && !after.includes("fc1.weight"), "one layer: " + after);
    // The drawings: the gradient tests of the last step, Alpha's parabola, GradHist1d's bars.
    await page.waitForFunction(() => document.getElementById("hist1d-title").textContent.includes("step 24"), null, { timeout: 30000 });
    const inked = (id) => page.evaluate((i) => {
      const c = document.getElementById(i);
      const pixels = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let k = 0; k < pixels.length; k += 4) {
        const [r, g, b, a] = [pixels[k], pixels[k + 1], pixels[k + 2], pixels[k + 3]];
        if (a > 0 && !(r === 0xea && g === 0xea && b === 0xf2)) n++;
      }
      return n;
    }, id);
    for (const id of ["tests", "alpha", "hist1d"]) check((await inked(id)) > 500, "the " + id + " drawing is drawn");
    check((await page.textContent("#tests-caption")).includes("ortho 0.340"), "the last OrthoTest in the gauge");
    // The images-only view still works.
    await page.goto(address + "/?static");
    await page.waitForFunction(() => [...document.images].every((i) => i.complete && i.naturalWidth > 0));
    check(outside.length === 0, "requests beyond loopback: " + outside.join(", "));
    console.log("ok: values at steps 0, 7, 19 and 24, the appended steps, the hovered value, the picker, the drawings (gradient tests, Alpha, GradHist1d), the images view; no request beyond loopback");
  } finally {
    await browser.close();
    server.kill("SIGINT");
    fs.rmSync(dir, { recursive: true, force: true });
  }
})().catch((e) => fail(e.message));
