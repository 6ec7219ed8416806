// Drives the octet extension in code-server through headless Chromium:
// a prompt whose root model delegates to a child agent; it waits for the
// child's card to show the child's path, its completed status and answer.
// Run by ../e2e_test.go (TestVSCodeSubAgents):  node drive-agents.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { openChat, timeout } from "./workbench.mjs";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(cfg.codeServerDir, "app") + "/");
const puppeteer = require("puppeteer-core");
const seen = {};
let page;

async function main() {
  const browser = await puppeteer.launch({ executablePath: cfg.chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    let frame;
    ({ page, frame } = await openChat(browser, cfg));
    await page.waitForFunction(() => document.querySelector(".statusbar")?.innerText.includes("octet:"), { timeout });

    const box = await frame.$("#prompt");
    await box.click();
    await box.type(cfg.prompt);
    await box.press("Enter");
    try {
      await frame.waitForFunction(() => document.querySelector(".item.agent.agent-completed") !== null, { timeout });
      await frame.waitForFunction((t) => document.getElementById("log").innerText.includes(t), { timeout }, cfg.rootAnswer);
    } catch (e) {
      seen.log = await frame.evaluate(() => document.getElementById("log").innerText).catch(() => "?");
      throw e;
    }
    // Open the card's tool calls for the screenshot.
    await frame.evaluate(() => {
      const d = document.querySelector(".item.agent details.agent-tools");
      if (d) d.open = true;
    });
    Object.assign(
      seen,
      await frame.evaluate(() => {
        const c = document.querySelector(".item.agent");
        const q = (s) => c.querySelector(s)?.innerText ?? "";
        return { cards: document.querySelectorAll(".item.agent").length, path: q(".path"), badge: q(".badge"), task: q(".task"), answer: q(".answer"), tools: q(".agent-tools"), usage: q(".usage") };
      }),
    );
    await frame.evaluate(() => window.scrollTo(0, 0));
    await new Promise((r) => setTimeout(r, 500));
    await page.screenshot({ path: path.join(cfg.shots, "subagents.png") });

    // A second child stalls: its card's Stop cancels its run only.
    await box.click();
    await box.type(cfg.stopPrompt);
    await box.press("Enter");
    const stop = await frame.waitForSelector(".item.agent.agent-running button[data-agent-stop]", { timeout });
    seen.runningActivity = await frame.evaluate(() => document.querySelector(".item.agent.agent-running .activity")?.innerText ?? "");
    await stop.click();
    try {
      await frame.waitForFunction(() => document.querySelector(".item.agent.agent-cancelled") !== null, { timeout });
      await frame.waitForFunction((t) => document.getElementById("log").innerText.includes(t), { timeout }, cfg.stopAnswer);
    } catch (e) {
      seen.log = await frame.evaluate(() => document.getElementById("log").innerText).catch(() => "?");
      throw e;
    }
    Object.assign(
      seen,
      await frame.evaluate(() => {
        const cards = [...document.querySelectorAll(".item.agent")];
        const c = document.querySelector(".item.agent.agent-cancelled");
        return {
          stoppedPath: c.querySelector(".path")?.innerText ?? "",
          stoppedHasButton: c.querySelector("button") !== null,
          cardsAfterStop: cards.length,
          statusesAfterStop: cards.map((e) => [...e.classList].find((k) => k.startsWith("agent-")) ?? ""),
          distinctSessions: new Set(cards.map((e) => e.dataset.session)).size,
        };
      }),
    );
    process.stdout.write(JSON.stringify(seen));
  } catch (e) {
    if (page) await page.screenshot({ path: path.join(cfg.shots, "failure-agents.png") }).catch(() => undefined);
    throw e;
  } finally {
    await browser.close();
  }
}

main().catch(async (e) => {
  process.stdout.write(JSON.stringify({ ...seen, failed: String(e && e.stack ? e.stack : e) }));
});
