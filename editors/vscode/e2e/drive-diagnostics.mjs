// Drives the octet extension in code-server through headless Chromium: a
// TypeScript file with a type error open in the editor (VS Code's own
// TypeScript server reports it), and a prompt whose model asks octet's
// diagnostics tool for the problems, fixes the error, and learns from the
// edit's result that the error went away.
// Run by ../e2e_test.go (TestVSCodeDiagnostics):  node drive-diagnostics.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { logText, openFile, promptAndDecide, runDriver, shotBoth, sleep, startChat, timeout } from "./workbench.mjs";

await runDriver("diagnostics", async (ctx) => {
  const { cfg, seen } = ctx;
  const { page, frame } = await startChat(ctx);
  await openFile(page, cfg.file);
  // The TypeScript server's report: one error in the status bar.
  await page.waitForFunction(() => /\b1\b/.test(document.querySelector('[id="status.problems"]')?.innerText ?? ""), { timeout });
  seen.problemsBefore = await page.$eval('[id="status.problems"]', (e) => e.innerText.replace(/\s+/g, " ").trim());
  await sleep(1000); // octet/diagnostics is debounced
  await promptAndDecide(frame, cfg.prompt, "approve", cfg.answer);
  await page.waitForFunction(() => /^\s*0\s+0\s*$/.test(document.querySelector('[id="status.problems"]')?.innerText ?? ""), { timeout });
  seen.problemsAfter = await page.$eval('[id="status.problems"]', (e) => e.innerText.replace(/\s+/g, " ").trim());
  seen.log = await logText(frame);
  // The tool rows, opened, for the screenshot.
  await frame.evaluate(() => document.querySelectorAll(".item.tool details").forEach((d) => (d.open = true)));
  await frame.evaluate(() => window.scrollTo(0, 0));
  await sleep(500);
  await shotBoth(page, cfg.shots, "diagnostics");
});
