// Drives the octet extension in code-server through headless Chromium:
// octet edits two open files (the edits stay in their buffers), then runs
// a command after each: the first file, which only octet changed, is
// saved before the command without asking; the second, which the user
// also changed, is saved only if the user says so (here: Don't Save), and
// the command's approval says it reads the file on disk.
// Run by ../e2e_test.go (TestVSCodeSaveDocuments):  node drive-save.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { chatText, clickCard, dialogButton, openFile, promptAndDecide, runDriver, send, sleep, startChat, timeout } from "./workbench.mjs";

await runDriver("save", async (ctx) => {
  const { cfg, seen } = ctx;
  const { page, frame } = await startChat(ctx);
  await openFile(page, cfg.first);
  await openFile(page, cfg.second);

  // octet's edit of the first file, then a command: saved without asking.
  await promptAndDecide(frame, cfg.editFirst, "approve", cfg.editFirstAnswer);
  seen.dirtyBefore = await page.$$eval(".tabs-container .tab.dirty", (ts) => ts.map((t) => t.getAttribute("aria-label")));
  await send(frame, cfg.readFirst);
  await frame.waitForSelector(".approval.state-pending", { timeout });
  seen.firstCard = await frame.$eval(".approval.state-pending", (e) => e.innerText);
  seen.dirtyAfterSave = await page.$$eval(".tabs-container .tab.dirty", (ts) => ts.map((t) => t.getAttribute("aria-label")));
  await clickCard(frame, "approve");
  await chatText(frame, cfg.readFirstAnswer, "after the first command");

  // octet's edit of the second file, the user's own edit, then a command:
  // the user is asked, and declines.
  await promptAndDecide(frame, cfg.editSecond, "approve", cfg.editSecondAnswer);
  await openFile(page, cfg.second);
  await page.click(".editor-instance .monaco-editor .view-lines");
  await page.keyboard.down("Control");
  await page.keyboard.press("End");
  await page.keyboard.up("Control");
  await page.keyboard.type(cfg.userText);
  await sleep(300);
  await send(frame, cfg.readSecond);
  seen.question = await dialogButton(page, "Don't Save");
  await frame.waitForSelector(".approval.state-pending", { timeout });
  seen.secondCard = await frame.$eval(".approval.state-pending", (e) => e.innerText);
  await sleep(300);
  await ctx.shot("unsaved-approval.png");
  await clickCard(frame, "approve");
  await chatText(frame, cfg.readSecondAnswer, "after the second command");
  seen.dirtyAtEnd = await page.$$eval(".tabs-container .tab.dirty", (ts) => ts.map((t) => t.getAttribute("aria-label")));
});
