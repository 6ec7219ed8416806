// Drives the octet extension in code-server through headless Chromium: a
// prompt to a provider nobody listens for, whose retries the chat shows
// as they happen (one row, updated in place), and the row's Cancel.
// Run by ../e2e_test.go (TestVSCodeRetries):  node drive-retry.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { chatText, logText, runDriver, send, sleep, startChat, timeout } from "./workbench.mjs";

const retryRow = (frame) => frame.$eval(".item.retry", (e) => e.innerText);

await runDriver("retry", async (ctx) => {
  const { cfg, seen } = ctx;
  const { page, frame } = await startChat(ctx);
  await send(frame, cfg.prompt);
  const started = Date.now();
  await frame.waitForSelector(".item.retry:not(.done) button[data-retry-cancel]", { timeout });
  seen.firstRetryAfterMs = Date.now() - started;
  seen.first = await retryRow(frame);
  // The next retry updates the same row.
  await frame.waitForFunction((t) => document.querySelector(".item.retry")?.innerText !== t, { timeout }, seen.first);
  seen.second = await retryRow(frame);
  seen.rows = await frame.$$eval(".item.retry", (es) => es.length);
  await sleep(300);
  await ctx.shot("retry.png");
  // The row is drawn again at each retry: click the one there now.
  await frame.evaluate(() => document.querySelector(".item.retry button[data-retry-cancel]").click());
  await chatText(frame, "Run cancelled", "after Cancel");
  seen.afterCancel = await retryRow(frame);
  seen.log = await logText(frame);
});
