// Drives the octet extension in code-server through headless Chromium:
// the empty chat's welcome and the side bar's split; Ctrl+Alt+O back to
// the chat; the editor's selection added with Ctrl+Alt+K; @-mentions of a
// file and of a symbol (completed, picked with Enter); the model, effort
// and mode pickers; the prompt with its chips; and after a reload the
// prompt shown with chips, not the attached text.
// Run by ../e2e_test.go (TestVSCodeComposer):  node drive-composer.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { chatText, openFile, reloadChat, runDriver, sleep, startChat, timeout } from "./workbench.mjs";

// chord presses modifiers+key (e.g. ["Control", "Alt"], "o").
async function chord(page, mods, key) {
  for (const m of mods) await page.keyboard.down(m);
  await page.keyboard.press(key);
  for (const m of [...mods].reverse()) await page.keyboard.up(m);
}

// chips is the composer's chips' text.
const chips = (frame) => frame.$$eval("#attachments .chip", (es) => es.map((e) => e.innerText.replace(/×$/, "").trim()));

// mention types text (ending in an @-mention's query) into the prompt and
// picks, with Enter, the completion labelled label; symbols come from a
// language server that may still be starting: the query is typed again
// until it offers label.
async function mention(frame, text, label) {
  const box = await frame.$("#prompt");
  await box.focus();
  await frame.evaluate(() => {
    const p = document.getElementById("prompt");
    p.selectionStart = p.selectionEnd = p.value.length;
  });
  await box.type(text);
  const end = Date.now() + timeout;
  for (;;) {
    // How many ArrowDowns from the selected row to the row of label (0:
    // none offered yet, else steps + 1).
    const offered = await frame
      .waitForFunction(
        (l) => {
          const rows = [...document.querySelectorAll("#mentions .mention")];
          const i = rows.findIndex((r) => r.querySelector(".label").innerText === l);
          const at = Math.max(0, rows.findIndex((r) => r.getAttribute("aria-selected") === "true"));
          return i >= 0 && !document.getElementById("mentions").hidden ? ((i - at + rows.length) % rows.length) + 1 : 0;
        },
        { timeout: 5000 },
        label,
      )
      .then((h) => h.jsonValue(), () => 0);
    if (offered > 0) {
      for (let i = 1; i < offered; i++) await box.press("ArrowDown");
      // The list can be drawn again meanwhile (more results came), which
      // selects its first row: Enter only once label's row is selected.
      const selected = await frame.evaluate(
        (l) => !document.getElementById("mentions").hidden && document.querySelector('#mentions .mention[aria-selected="true"] .label')?.innerText === l,
        label,
      );
      if (selected) break;
      if (Date.now() > end) throw new Error(`the @-mention row ${label} could not be selected`);
      continue;
    }
    if (Date.now() > end) throw new Error(`the @-mention completion never offered ${label}`);
    await box.press("Backspace");
    await box.type(text.slice(-1));
  }
  const rows = await frame.$$eval("#mentions .mention", (rs) => rs.map((r) => r.innerText.replace(/\s+/g, " ")));
  await box.press("Enter");
  return rows;
}

await runDriver("composer", async (ctx) => {
  const { cfg, seen } = ctx;
  const { page, frame } = await startChat(ctx);
  // The empty chat welcomes; the Sessions pane leaves the chat most of the side bar.
  await frame.waitForFunction(() => !document.getElementById("welcome").hidden && document.getElementById("welcome").innerText.includes("Ask octet"), { timeout });
  seen.welcome = await frame.$eval("#welcome", (e) => e.innerText);
  seen.panes = await page.$$eval(".part.sidebar .split-view-view", (vs) =>
    vs.map((v) => ({ title: v.querySelector(".pane-header")?.innerText.trim() ?? "", height: v.getBoundingClientRect().height })).filter((v) => v.title !== ""),
  );
  await ctx.shot("welcome.png");

  // Ctrl+Alt+K adds the editor's selection, Ctrl+Alt+O comes back to the chat.
  await openFile(page, cfg.file);
  await page.click(".editor-instance .monaco-editor .view-lines");
  await chord(page, ["Control"], "Home");
  for (let i = 0; i < 4; i++) await page.keyboard.press("ArrowDown");
  for (let i = 0; i < 2; i++) await chord(page, ["Shift"], "ArrowDown");
  await chord(page, ["Control", "Alt"], "k");
  await frame.waitForFunction(() => document.querySelectorAll("#attachments .chip").length === 1, { timeout });
  await page.click(".editor-instance .monaco-editor .view-lines");
  await chord(page, ["Control", "Alt"], "o");
  await frame.waitForFunction(() => document.hasFocus() && document.activeElement?.id === "prompt", { timeout });
  seen.focusedByKey = true;

  // @-mentions: a file, then a symbol.
  seen.fileRows = await mention(frame, cfg.fileMention, cfg.fileLabel);
  seen.symbolRows = await mention(frame, cfg.symbolMention, cfg.symbolLabel);
  await frame.waitForFunction(() => document.querySelectorAll("#attachments .chip").length === 3, { timeout });
  seen.chips = await chips(frame);
  seen.promptText = await frame.$eval("#prompt", (e) => e.value);

  // The pickers, before the first prompt: they are for the new session.
  await frame.select("#effort", cfg.effort);
  await frame.select("#mode", cfg.mode);
  await page.waitForFunction((l) => document.querySelector(".statusbar")?.innerText.includes(l), { timeout }, cfg.modeLabel);
  seen.status = await page.$eval(".statusbar", (e) => e.innerText);
  await sleep(300);
  await ctx.shot("composer.png");
  await (await frame.$("#prompt")).press("Enter");
  await chatText(frame, cfg.answer, "the first answer");
  seen.chipsAfterSend = await chips(frame);
  seen.userChips = await frame.$$eval(".item.user .chip", (es) => es.map((e) => e.innerText.trim()));

  // The pickers during the session: for the session.
  await frame.select("#model", cfg.model);
  await frame.select("#effort", cfg.effort2);
  await sleep(500);
  const box = await frame.$("#prompt");
  await box.type(cfg.prompt2);
  await box.press("Enter");
  await chatText(frame, cfg.answer2, "the second answer");
  seen.pickers = await frame.evaluate(() => ({
    model: document.getElementById("model").value,
    effort: document.getElementById("effort").value,
    mode: document.getElementById("mode").value,
  }));

  // After a reload the prompt shows its chips, not the attached text.
  const again = await reloadChat(page);
  await chatText(again, cfg.answer2, "after a reload");
  seen.reloadedUser = await again.$eval(".item.user", (e) => e.innerText);
  seen.reloadedChips = await again.$$eval(".item.user:first-child .chip", (es) => es.map((e) => e.innerText.trim()));
  // The pickers show the resumed session's selection (a new octet
  // process; octet recorded it), not the defaults.
  await again
    .waitForFunction((e) => document.getElementById("effort").value === e, { timeout: 10000 }, cfg.effort2)
    .catch(() => undefined);
  seen.reloadedPickers = await again.evaluate(() => ({
    model: document.getElementById("model").value,
    effort: document.getElementById("effort").value,
  }));
});
