// Headless Chromium on `cockpit serve`: a screenshot, a stream update, another screenshot.
const { chromium } = require("playwright-core");
const { execSync } = require("child_process");
(async () => {
  const [url, append, before, after] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1650 } });
  const loaded = () => [...document.images].every((i) => i.complete && i.naturalWidth > 0);
  await page.goto(url);
  await page.waitForFunction(loaded);
  const first = await page.textContent("#step");
  const firstSrc = await page.getAttribute("#primary", "src");
  await page.screenshot({ path: before });
  execSync(append);
  await page.waitForFunction((b) => document.getElementById("step").textContent !== b, first, { timeout: 30000 });
  await page.waitForFunction(loaded);
  const second = await page.textContent("#step");
  const secondSrc = await page.getAttribute("#primary", "src");
  await page.screenshot({ path: after });
  console.log(`before: "${first}" (${firstSrc}); after the update, without a reload: "${second}" (${secondSrc})`);
  await browser.close();
})();
