// Drives the octet extension in code-server through headless Chromium:
// approvals of edits of a file open in a preview tab (what one click in
// the Explorer opens): View diff, then Approve in the chat's card; View
// diff, then Approve and Deny in the diff editor's title; and a failed
// edit, whose tool row says why.
// Run by ../e2e_test.go (TestVSCodePreviewTabApprovals):  node drive-preview.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { chatText, clickCard, clickFound, logText, runDriver, send, shotBoth, sleep, startChat, timeout, waitForDiffEditor } from "./workbench.mjs";

// openInPreview opens file with one click in the Explorer (a preview
// tab), then shows the octet view again.
async function openInPreview(page, file) {
  await page.click('.activitybar [aria-label^="Explorer"]');
  await clickFound(page, (f) => [...document.querySelectorAll(".explorer-folders-view .monaco-list-row")].find((r) => r.innerText.trim() === f), file);
  await page.waitForFunction((f) => document.title.includes(f), { timeout }, file);
  await page.click('.activitybar [aria-label="octet"]');
}

// tabs lists the editor tabs: their label, and whether each is a preview
// (VS Code says so in the tab's accessible name).
function tabs(page) {
  return page.$$eval(".tabs-container .tab", (ts) =>
    ts.map((t) => {
      const label = t.getAttribute("aria-label") ?? "";
      return { label: label.replace(/, preview$/, ""), preview: label.endsWith(", preview") };
    }),
  );
}

// bufferText is the text of the (non-diff) editor showing file.
function bufferText(page) {
  return page.evaluate(() => {
    const ed = [...document.querySelectorAll(".editor-instance .monaco-editor")].find((e) => !e.closest(".monaco-diff-editor"));
    return ed ? ed.querySelector(".view-lines").innerText.replace(/\u00a0/g, " ") : "";
  });
}

// titleAction clicks the diff editor's title action labelled label.
async function titleAction(page, label) {
  const a = await page.waitForSelector(`.editor-actions .action-label[aria-label^="${label}"]`, { visible: true, timeout });
  await a.click();
}

await runDriver("preview", async (ctx) => {
  const { cfg, seen } = ctx;
  const { page, frame } = await startChat(ctx);
  await openInPreview(page, "a.txt");
  seen.tabsBefore = await tabs(page);

  // 1. View diff, then Approve in the card.
  await send(frame, cfg.cardPrompt);
  await clickCard(frame, "view_diff");
  await waitForDiffEditor(page, frame);
  seen.tabsWithDiff = await tabs(page);
  await sleep(300);
  await clickCard(frame, "approve");
  await chatText(frame, cfg.cardAnswer, "after approving in the card");
  seen.logAfterCard = await logText(frame);
  seen.bufferAfterCard = await bufferText(page);

  // 2. View diff, then the diff editor's title: Approve.
  await send(frame, cfg.titlePrompt);
  await clickCard(frame, "view_diff");
  await waitForDiffEditor(page, frame);
  seen.titleActions = await page.$$eval(".editor-actions .action-label", (as) => as.map((a) => a.getAttribute("aria-label") ?? ""));
  await sleep(300);
  await shotBoth(page, cfg.shots, "approval");
  await titleAction(page, "Approve");
  await chatText(frame, cfg.titleAnswer, "after approving in the diff editor");
  await page.waitForFunction(() => document.querySelector(".monaco-diff-editor") === null, { timeout });
  seen.bufferAfterTitle = await bufferText(page);

  // 3. View diff, then the diff editor's title: Deny.
  await send(frame, cfg.denyPrompt);
  await clickCard(frame, "view_diff");
  await waitForDiffEditor(page, frame);
  await titleAction(page, "Deny");
  await chatText(frame, cfg.denyAnswer, "after denying in the diff editor");
  seen.settled = await frame.$$eval(".approval .settled", (es) => es.map((e) => e.innerText));

  // 4. An edit that fails (approved, as its card shows why it will): its
  // row says why, not JSON.
  await send(frame, cfg.failPrompt);
  await clickCard(frame, "approve");
  await chatText(frame, cfg.failAnswer, "after the failed edit");
  seen.failedRow = await frame.$eval(".item.tool.status-error", (e) => e.innerText);
  seen.logAfterAll = await logText(frame);
  await frame.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
  await sleep(300);
  await ctx.shot("failed-tool.png");
});
