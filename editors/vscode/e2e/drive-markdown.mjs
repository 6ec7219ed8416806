// Drives the octet extension in code-server through headless Chromium:
// a streamed answer with a table, a nested list and highlighted code,
// in the light theme and then the dark one; the code block's Copy (the
// clipboard) and Insert (at the cursor of the open file).
// Run by ../e2e_test.go (TestVSCodeMarkdown):  node drive-markdown.mjs <config.json>
// It prints one JSON object: what it saw, or {"failed": "..."}.
import { chatText, openFile, runDriver, send, setTheme, sleep, startChat, timeout } from "./workbench.mjs";

// answer is what the chat drew of the answer: its table, lists and the
// code block (its highlighted tokens, and whether its code is one box on
// the block's background, not a chip per line).
function answer(frame) {
  return frame.evaluate(() => {
    const a = [...document.querySelectorAll(".item.assistant .answer")].pop();
    const code = a.querySelector(".code-block pre code");
    const bg = getComputedStyle(code).backgroundColor;
    return {
      theme: document.body.className,
      cells: [...a.querySelectorAll("table th, table td")].map((c) => c.innerText),
      nested: [...a.querySelectorAll("li > ul > li")].map((l) => l.innerText),
      tokens: [...code.querySelectorAll("span[class^=hljs-]")].map((s) => `${s.className}:${s.innerText}`),
      codeBoxes: code.getClientRects().length,
      codeBackground: bg === "rgba(0, 0, 0, 0)" || bg === "transparent" ? "none" : bg,
      buttons: [...a.querySelectorAll(".code-block .code-action")].map((b) => b.innerText),
    };
  });
}

await runDriver("markdown", async (ctx) => {
  const { cfg, seen } = ctx;
  await ctx.browser.defaultBrowserContext().overridePermissions(cfg.url, ["clipboard-read", "clipboard-write", "clipboard-sanitized-write"]);
  const { page, frame } = await startChat(ctx);
  await openFile(page, cfg.file);
  await send(frame, cfg.prompt);
  await chatText(frame, cfg.answerEnd, "the streamed answer");
  await frame.waitForFunction(() => document.querySelector(".item.assistant.streaming") === null, { timeout });
  seen.light = await answer(frame);
  await frame.evaluate(() => window.scrollTo(0, 0));
  await sleep(500);
  await ctx.shot("answer-light.png");

  // Copy puts the block's code on the clipboard; Insert puts it at the
  // cursor of the open file.
  await (await frame.$('.code-block .code-action[data-code-action="copy"]')).click();
  await page.waitForFunction(async (t) => (await navigator.clipboard.readText()).includes(t), { timeout }, cfg.codeLine);
  seen.clipboard = await page.evaluate(() => navigator.clipboard.readText());
  await (await frame.$('.code-block .code-action[data-code-action="insert"]')).click();
  await page.waitForFunction(
    (t) => [...document.querySelectorAll(".editor-instance .monaco-editor .view-lines")].some((e) => e.innerText.replace(/\u00a0/g, " ").includes(t)),
    { timeout },
    cfg.codeLine,
  );
  seen.buffer = await page.evaluate(() => document.querySelector(".editor-instance .monaco-editor .view-lines").innerText.replace(/\u00a0/g, " "));

  // The dark theme.
  await setTheme(page, "Dark Modern");
  await frame.waitForFunction(() => document.body.classList.contains("vscode-dark"), { timeout });
  await frame.evaluate(() => window.scrollTo(0, 0));
  await sleep(800);
  seen.dark = await answer(frame);
  await ctx.shot("answer-dark.png");
});
