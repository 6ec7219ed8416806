// Drives the octet extension in code-server through headless Chromium
// (puppeteer-core from the code-server install): the chat, an approval
// reviewed from its notification and decided in the chat after its diff, a
// multi-line command's approval, a denial with a reason, the sessions tree
// and a reload.
// Run by ../e2e_test.go:  node drive.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { chatText, clickCard, clickFound, clickNotification, dialogButton, notification, openChat, openFile, reloadChat, review, send, timeout, waitForDiffEditor } from "./workbench.mjs";

const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
const require = createRequire(path.join(cfg.codeServerDir, "app") + "/");
const puppeteer = require("puppeteer-core");
const seen = {};
let page;

function shot(page, name) {
  return page.screenshot({ path: path.join(cfg.shots, name) });
}

async function main() {
  const browser = await puppeteer.launch({ executablePath: cfg.chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  try {
    let frame;
    ({ page, frame } = await openChat(browser, cfg));
    await page.waitForFunction(() => document.querySelector(".statusbar")?.innerText.includes("octet:"), { timeout });
    seen.statusBefore = await page.$eval(".statusbar", (e) => e.innerText);

    // Case 1: the notification only opens the chat's card; the card's View
    // diff opens the diff, and the card approves.
    await send(frame, cfg.approvePrompt);
    seen.editNotification = await notification(page, "a.txt");
    seen.approvalNotification = await review(page, frame);
    await clickCard(frame, "view_diff");
    await waitForDiffEditor(page, frame);
    await page.waitForFunction(
      (t) => [...document.querySelectorAll(".monaco-diff-editor .modified .view-lines")].some((e) => e.innerText.replace(/\u00a0/g, " ").includes(t)),
      { timeout },
      cfg.proposedText,
    );
    seen.diffTab = await page.$eval(".tabs-container .tab.active", (e) => e.innerText).catch(() => "");
    await chatText(frame, "Approval:", "the inline approval");
    await new Promise((r) => setTimeout(r, 500));
    await shot(page, "approval-diff.png");
    await clickCard(frame, "approve");
    await page.waitForFunction(() => document.querySelector(".monaco-diff-editor") === null, { timeout });
    seen.diffClosed = true;
    await chatText(frame, cfg.approveAnswer, "after approving");
    await chatText(frame, "Run completed", "after approving");
    await frame.evaluate(() => window.scrollTo(0, 0));
    await new Promise((r) => setTimeout(r, 500));
    await shot(page, "chat.png");
    seen.chatAfterApprove = await frame.evaluate(() => document.getElementById("log").innerText);
    seen.reasoningCollapsed = await frame.evaluate(() => {
      const d = document.querySelector("details.reasoning");
      return d !== null && !d.open && d.innerText.includes("Reasoning");
    });
    seen.fileLinks = await frame.$$eval("a.file", (as) => as.map((a) => a.dataset.file));

    // The run's change opens in the diff editor (octet/session/diff).
    const link = await frame.waitForSelector(".run a.open-diff", { timeout });
    await link.click();
    await page.waitForFunction(() => document.querySelector(".tabs-container .tab.active")?.innerText.includes("octet's change"), { timeout });
    await page.waitForFunction(
      () => [...document.querySelectorAll(".monaco-diff-editor .original .view-lines")].some((e) => {
        const text = e.innerText.replace(/\u00a0/g, " ");
        return text.includes("hello") && !text.includes("world"); // before the run
      }),
      { timeout },
    );
    seen.runDiffTab = await page.$eval(".tabs-container .tab.active", (e) => e.innerText);

    // The session is listed in the Sessions view, titled by its first prompt.
    await page.waitForFunction(
      (t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].some((r) => r.innerText.includes(t)),
      { timeout },
      cfg.sessionTitle,
    );
    seen.sessionListed = true;

    // Case 2: a multi-line command. Its notification shows it on one line
    // (⏎ for the newline), makes no link of it and offers only Review…;
    // Review… shows the card with the whole command, which approves it.
    await send(frame, cfg.bashPrompt);
    seen.bashNotification = await notification(page, "bash");
    await new Promise((r) => setTimeout(r, 500));
    await shot(page, "approval-notification.png");
    await review(page, frame);
    seen.bashCard = await frame.$eval(".approval.state-pending", (e) => e.innerText);
    // The card redrawn right after a reveal (the extension's upsert, which
    // carries no outline) keeps the reveal's outline and the focus, on
    // the card or on the button that had it.
    seen.redraws = await frame.evaluate(() => {
      const post = (data) => window.dispatchEvent(new MessageEvent("message", { data }));
      const redraw = (focus, insert) => {
        const card = document.querySelector(".approval.state-pending");
        post({ type: "reveal", id: card.id });
        if (focus) card.querySelector(focus).focus();
        const before = document.activeElement;
        let html = card.outerHTML.replace(" revealed", "");
        if (insert) html = html.replace("<button", '<button data-extra="1">Extra</button><button');
        post({ type: "upsert", id: card.id, html });
        const now = document.getElementById(card.id);
        const focused = (el) => (el === card || el === now ? "card" : (el?.dataset.decision ?? el?.tagName ?? ""));
        return { replaced: now !== card, outlined: now.classList.contains("revealed"), html: html.includes("revealed"), before: focused(before), after: focused(document.activeElement) };
      };
      // The third redraw adds a button before the others: the focus stays on Deny.
      return [redraw(""), redraw('button[data-decision="deny"]'), redraw('button[data-decision="deny"]', true)];
    });
    seen.statusWhileWaiting = await page.$eval(".statusbar", (e) => e.innerText);
    await new Promise((r) => setTimeout(r, 300));
    await shot(page, "approval-card.png");
    await clickCard(frame, "approve");
    await chatText(frame, cfg.bashAnswer, "after approving the command");

    // Case 3: deny another edit, with a reason (the card's Deny with reason…).
    await send(frame, cfg.denyPrompt);
    // Under load the chat can redraw under the click; the approval is
    // still pending then: click again.
    let input;
    for (let attempt = 1; !input; attempt++) {
      await clickCard(frame, "deny_reason");
      input = await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: 15000 }).catch((e) => {
        if (attempt === 4) throw e;
        return undefined;
      });
    }
    await input.type(cfg.denyReason);
    await input.press("Enter");
    await chatText(frame, cfg.denyAnswer, "after denying");
    await chatText(frame, "denied", "after denying");
    // Its notification is still up (VS Code cannot take one down): its
    // Review… says the request was denied already.
    await clickNotification(page, "Review…");
    seen.staleReview = (await notification(page, "already")).message;
    await shot(page, "stale-review.png");
    await new Promise((r) => setTimeout(r, 500));
    await shot(page, "denied.png");
    seen.chatAfterDeny = await frame.evaluate(() => document.getElementById("log").innerText);
    seen.statusAfter = await page.$eval(".statusbar", (e) => e.innerText);

    // A reload restores the workspace's last session in the chat.
    frame = await reloadChat(page);
    await chatText(frame, cfg.approvePrompt, "after a reload");
    await chatText(frame, cfg.denyAnswer, "after a reload");
    seen.restored = true;
    await shot(page, "reloaded.png");
    // Case 4: an edit of a file open in the editor, approved in the chat,
    // lands in its buffer (workspace/applyEdit), not on disk; undo reverts it.
    await openFile(page, cfg.openFile);
    await send(frame, cfg.bufferPrompt);
    const approve = await frame.waitForSelector('.approval.state-pending button[data-decision="approve"]', { timeout });
    await approve.click();
    await chatText(frame, cfg.bufferAnswer, "after approving in the chat");
    const editorText = () =>
      page.evaluate(() => {
        const ed = [...document.querySelectorAll(".editor-instance .monaco-editor")].find((e) => !e.closest(".monaco-diff-editor"));
        return ed ? ed.querySelector(".view-lines").innerText.replace(/\u00a0/g, " ") : "";
      });
    await page.waitForFunction(
      (t) => [...document.querySelectorAll(".editor-instance .monaco-editor .view-lines")].some((e) => e.innerText.replace(/\u00a0/g, " ").includes(t)),
      { timeout },
      cfg.bufferText,
    );
    seen.bufferAfterEdit = await editorText();
    seen.bufferDirty = await page.evaluate(() => [...document.querySelectorAll(".tabs-container .tab")].some((t) => t.classList.contains("dirty")));
    await shot(page, "buffer-edit.png");
    await page.click(".editor-instance .monaco-editor .view-lines");
    await page.keyboard.down("Control");
    await page.keyboard.press("z");
    await page.keyboard.up("Control");
    await page.waitForFunction(
      (t) => ![...document.querySelectorAll(".editor-instance .monaco-editor .view-lines")].some((e) => e.innerText.replace(/\u00a0/g, " ").includes(t)),
      { timeout },
      cfg.bufferText,
    );
    seen.bufferAfterUndo = await editorText();

    // The Sessions view: rename the session, fork it, delete the fork.
    const rows = (t) =>
      page.evaluate((t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].filter((r) => r.innerText.includes(t)).length, t);
    // A row's actions show on hover; the tree redraws its rows (a
    // session's time, its title), so a row found can be gone when
    // clicked: it is looked for again.
    async function rowAction(text, action) {
      await clickFound(
        page,
        (t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].find((r) => r.innerText.includes(t)),
        text,
        timeout,
        async (row) => {
          await row.hover();
          const button = await row.waitForSelector(`.action-label[aria-label^="${action}"]`, { visible: true, timeout: 10000 }).catch(() => null);
          if (!button) throw new Error(`${action} is not clickable on the row (redrawn?)`);
          return button;
        },
      );
    }
    await rowAction(cfg.sessionTitle, "Rename Session");
    const title = await page.waitForSelector(".quick-input-widget input", { visible: true, timeout });
    await page.keyboard.down("Control");
    await page.keyboard.press("a");
    await page.keyboard.up("Control");
    await page.keyboard.press("Backspace");
    await title.type(cfg.newTitle);
    await title.press("Enter");
    await page.waitForFunction(async (t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].some((r) => r.innerText.includes(t)), { timeout }, cfg.newTitle);
    seen.renamed = true;
    // A title is plain text in the tree: $(name) in it draws no icon.
    seen.titleIcons = await page.evaluate(
      (t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].filter((r) => r.innerText.includes(t)).flatMap((r) => [...r.querySelectorAll(".label-name .codicon")]).length,
      cfg.newTitle,
    );
    await rowAction(cfg.newTitle, "Fork Session");
    await page.waitForFunction(
      (t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].filter((r) => r.innerText.includes(t)).length === 2,
      { timeout },
      cfg.newTitle,
    );
    seen.forkRows = await rows(cfg.newTitle);
    await rowAction("●", "Delete Session"); // the fork is the current session
    await dialogButton(page, "Delete");
    await page.waitForFunction(
      (t) => [...document.querySelectorAll(".pane-body .monaco-list-row")].filter((r) => r.innerText.includes(t)).length === 1,
      { timeout },
      cfg.newTitle,
    );
    seen.rowsAfterDelete = await rows(cfg.newTitle);
    process.stdout.write(JSON.stringify(seen));
  } catch (e) {
    if (page) await shot(page, "failure.png").catch(() => undefined);
    throw e;
  } finally {
    await browser.close();
  }
}

main().catch(async (e) => {
  process.stdout.write(JSON.stringify({ ...seen, failed: String(e && e.stack ? e.stack : e) }));
});
