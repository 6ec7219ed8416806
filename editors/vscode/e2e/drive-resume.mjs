// Drives the octet extension in code-server through headless Chromium:
// four runs (an approved edit, a denied command, a failed run, a
// cancelled run), a reload that resumes the session (the denial shows as
// denied, the failed and cancelled runs keep their markers), then octet:
// Rewind, which offers every prompt, the first included, with its date
// in words, and takes the first one back.
// Run by ../e2e_test.go (TestVSCodeResumeAndRewind):  node drive-resume.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { chatText, clickFound, command, dialogButton, logText, promptAndDecide, reloadChat, runDriver, send, startChat, timeout } from "./workbench.mjs";

// pickQuick waits for the quick pick's row that shows text and returns
// every row's label and description, after picking it.
async function pickQuick(page, text) {
  let rows = [];
  await clickFound(page, (t) => [...document.querySelectorAll(".quick-input-list .monaco-list-row")].find((r) => r.innerText.includes(t)), text, timeout, async () => {
    rows = await page.$$eval(".quick-input-list .monaco-list-row", (rs) =>
      rs.map((r) => ({ label: r.querySelector(".label-name")?.innerText ?? "", description: r.querySelector(".label-description")?.innerText ?? "" })),
    );
  });
  return rows;
}

await runDriver("resume", async (ctx) => {
  const { cfg, seen } = ctx;
  const { page, frame } = await startChat(ctx);
  await promptAndDecide(frame, cfg.editPrompt, "approve", cfg.editAnswer);
  await promptAndDecide(frame, cfg.denyPrompt, "deny", cfg.denyAnswer);
  await send(frame, cfg.failPrompt);
  await chatText(frame, "Run failed", "the failed run");
  await send(frame, cfg.cancelPrompt);
  await frame.waitForSelector("#cancel:not([hidden])", { timeout });
  await (await frame.$("#cancel")).click();
  await chatText(frame, "Run cancelled", "the cancelled run");
  seen.live = await logText(frame);

  const again = await reloadChat(page);
  await chatText(again, cfg.cancelPrompt, "after a reload");
  seen.resumed = await logText(again);
  seen.resumedTools = await again.$$eval(".item.tool", (es) => es.map((e) => e.innerText.replace(/\s+/g, " ").trim()));
  await ctx.shot("resumed.png");

  await command(page, "octet: Rewind");
  seen.rewindRows = await pickQuick(page, cfg.editPrompt);
  await pickQuick(page, "Files and conversation");
  seen.rewindDialog = await dialogButton(page, "Rewind");
  await again.waitForFunction((t) => !document.getElementById("log").innerText.includes(t), { timeout }, cfg.editAnswer);
  seen.afterRewind = await logText(again);
});
