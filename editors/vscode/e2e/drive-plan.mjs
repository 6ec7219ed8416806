// Drives the octet extension in code-server through headless Chromium:
// an image pasted into the prompt and another dropped on it (both shown
// as chips, then sent with the prompt), the model's plan as one card
// updated in place, and the card again after a reload.
// Run by ../e2e_test.go (TestVSCodePlanAndImages):  node drive-plan.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { openChat, reloadChat, send, shotBoth, timeout } from "./workbench.mjs";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(cfg.codeServerDir, "app") + "/");
const puppeteer = require("puppeteer-core");
const seen = {};
let page;

// giveImage pastes (how: "paste") or drops ("drop") an image file into
// the chat's composer, as a browser does with a clipboard or a drag.
async function giveImage(frame, how, name, b64) {
  await frame.evaluate(
    (how, name, b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], name, { type: "image/png" }));
      if (how === "paste") {
        document.getElementById("prompt").dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
      } else {
        document.getElementById("composer").dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
      }
    },
    how,
    name,
    b64,
  );
}

const logText = (frame) => frame.evaluate(() => document.getElementById("log").innerText);

async function main() {
  const browser = await puppeteer.launch({ executablePath: cfg.chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    let frame;
    ({ page, frame } = await openChat(browser, cfg));
    await page.waitForFunction(() => document.querySelector(".statusbar")?.innerText.includes("octet:"), { timeout });
    await giveImage(frame, "paste", "pasted.png", cfg.pasted);
    await giveImage(frame, "drop", "dropped.png", cfg.dropped);
    await frame.waitForFunction(() => document.querySelectorAll("#attachments .image-chip").length === 2, { timeout });
    seen.chips = await frame.$eval("#attachments", (e) => e.innerText);
    await send(frame, cfg.prompt);
    try {
      await frame.waitForFunction((t) => document.getElementById("log").innerText.includes(t), { timeout }, cfg.answer);
    } catch (e) {
      seen.log = await logText(frame).catch(() => "?");
      throw e;
    }
    seen.chipsAfterSend = await frame.$$eval("#attachments .image-chip", (es) => es.length);
    seen.userImages = await frame.$$eval(".item.user .image-chip", (es) => es.map((e) => e.innerText));
    seen.planCards = await frame.$$eval(".item.plan", (es) => es.length);
    seen.plan = await frame.$eval(".item.plan", (e) => e.innerText);
    seen.toolItems = await frame.$$eval(".item.tool", (es) => es.map((e) => e.innerText));
    await frame.evaluate(() => window.scrollTo(0, 0));
    await new Promise((r) => setTimeout(r, 500));
    await shotBoth(page, cfg.shots, "plan");

    // A reload restores the session: the plan card comes back.
    frame = await reloadChat(page);
    await frame.waitForFunction(() => document.querySelector(".item.plan") !== null, { timeout });
    seen.planAfterReload = await frame.$eval(".item.plan", (e) => e.innerText);
    seen.planCardsAfterReload = await frame.$$eval(".item.plan", (es) => es.length);
    process.stdout.write(JSON.stringify(seen));
  } catch (e) {
    if (page) await page.screenshot({ path: path.join(cfg.shots, "failure.png") }).catch(() => undefined);
    throw e;
  } finally {
    await browser.close();
  }
}

main().catch(async (e) => {
  process.stdout.write(JSON.stringify({ ...seen, failed: String(e && e.stack ? e.stack : e) }));
});
