// Shared by the code-server drivers (drive*.mjs): run a driver, open the
// workbench on a workspace, show the octet chat and find its webview, and
// the waits and clicks several drivers make.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

// timeout bounds each wait of a driver.
export const timeout = 120000;

// chatFrame finds the frame of the octet chat webview.
export async function chatFrame(page) {
  const end = Date.now() + timeout;
  while (Date.now() < end) {
    for (const f of page.frames()) {
      let has;
      try {
        has = f.evaluate(() => document.getElementById("prompt") !== null).catch(() => false);
      } catch {
        continue; // a detached frame of the page before a reload
      }
      if (await Promise.race([has, new Promise((r) => setTimeout(() => r(false), 2000))])) return f;
    }
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error(`the octet chat view did not appear; frames: ${page.frames().map((f) => f.url()).join(", ")}`);
}

// openChat opens cfg.workspace in code-server at cfg.url in a new page of
// browser, shows the octet chat with a wider side bar (so it reads well
// in screenshots) and returns the page and the chat's frame.
export async function openChat(browser, cfg) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
  await page.goto(`${cfg.url}/?folder=${encodeURIComponent(cfg.workspace)}`, { waitUntil: "networkidle2", timeout: 90000 });
  await page.waitForSelector(".monaco-workbench", { timeout: 90000 });
  const icon = await page.waitForSelector('.activitybar [aria-label="octet"]', { timeout: 90000 });
  await icon.click();
  const frame = await chatFrame(page);
  const bar = await page.$eval(".part.sidebar", (e) => {
    const r = e.getBoundingClientRect();
    return { x: r.right, y: r.top + r.height / 2 };
  });
  await page.mouse.move(bar.x + 1, bar.y);
  await page.mouse.down();
  await page.mouse.move(bar.x + 260, bar.y, { steps: 10 });
  await page.mouse.up();
  return { page, frame };
}

// send types text into the chat's prompt and sends it.
export async function send(frame, text) {
  const box = await frame.$("#prompt");
  await box.click();
  await box.type(text);
  await box.press("Enter");
}

// reloadChat reloads the workbench and returns the octet chat's frame
// again (showing the octet view when the reload did not).
export async function reloadChat(page) {
  await page.reload({ waitUntil: "networkidle2", timeout: 90000 });
  await page.waitForSelector(".monaco-workbench", { timeout: 90000 });
  const icon = await page.waitForSelector('.activitybar [aria-label="octet"]', { timeout: 90000 });
  if (!(await page.$('.activitybar [aria-label="octet"].checked, .activitybar .checked [aria-label="octet"]'))) {
    await icon.click();
  }
  return chatFrame(page);
}

// chatText waits for the chat to show text (what says when, in the error).
export async function chatText(frame, text, what) {
  try {
    await frame.waitForFunction((t) => document.getElementById("log").innerText.includes(t), { timeout }, text);
  } catch {
    const got = await frame.evaluate(() => document.getElementById("log").innerText).catch(() => "?");
    throw new Error(`${what}: the chat never showed ${JSON.stringify(text)}; it shows:\n${got}`);
  }
}

// notification waits for the toast whose message includes text and
// returns its message, its buttons' labels and the links in its message.
export async function notification(page, text) {
  const h = await page.waitForFunction(
    (t) => [...document.querySelectorAll(".notifications-toasts .notification-toast")].find((n) => n.innerText.includes(t)),
    { timeout },
    text,
  );
  return page.evaluate((n) => ({
    message: n.querySelector(".notification-list-item-message").innerText,
    buttons: [...n.querySelectorAll(".monaco-button")].map((b) => b.textContent.trim()).filter((l) => l !== ""),
    links: [...n.querySelectorAll(".notification-list-item-message a")].map((a) => a.getAttribute("href")),
  }), h);
}

// clickCard clicks the button of the pending approval card in the chat
// whose data-decision is decision.
export async function clickCard(frame, decision) {
  const b = await frame.waitForSelector(`.approval.state-pending button[data-decision="${decision}"]`, { timeout });
  await b.click();
}

// promptAndDecide sends text, decides its approval card (decision: the
// card's data-decision) and waits for the chat to show answer.
export async function promptAndDecide(frame, text, decision, answer) {
  await send(frame, text);
  await clickCard(frame, decision);
  await chatText(frame, answer, `after deciding (${decision}) the approval of ${JSON.stringify(text)}`);
}

// review clicks an approval notification's Review… and waits for it to
// have shown the pending card: the card focused, or outlined — seen by an
// observer set before the click, since the outline lasts 2 s, which a
// loaded machine can let pass before a poll. A click that a loaded
// machine loses (the toast is still there, nothing shown) is made again.
// It returns the notification's message.
export async function review(page, frame) {
  await frame.evaluate(() => {
    window.octetRevealSeen = false;
    window.octetRevealObserver?.disconnect(); // the previous review's
    const seen = () => {
      if (document.querySelector(".approval.state-pending.revealed")) window.octetRevealSeen = true;
    };
    window.octetRevealObserver = new MutationObserver(seen);
    window.octetRevealObserver.observe(document.getElementById("log"), { subtree: true, childList: true, attributes: true, attributeFilter: ["class"] });
  });
  const end = Date.now() + timeout;
  const message = await clickNotification(page, "Review…");
  for (;;) {
    const shown = await frame
      .waitForFunction(() => document.activeElement?.matches(".approval.state-pending") || window.octetRevealSeen, { timeout: Math.max(1, Math.min(10000, end - Date.now())) })
      .then(() => true, () => false);
    if (shown) {
      await frame.evaluate(() => window.octetRevealObserver?.disconnect()).catch(() => {});
      return message;
    }
    if (Date.now() >= end) {
      throw new Error(`Review… showed no pending card in ${timeout} ms`);
    }
    const still = await page.evaluate(() => [...document.querySelectorAll(".notifications-toasts .monaco-button")].some((b) => b.textContent.trim() === "Review…"));
    if (still) {
      await clickNotification(page, "Review…");
    }
  }
}

// clickNotification clicks the button labelled label of a notification
// toast and returns the toast's message.
export async function clickNotification(page, label) {
  let text = "";
  await clickFound(
    page,
    (l) => [...document.querySelectorAll(".notifications-toasts .monaco-button")].find((b) => b.textContent.trim() === l),
    label,
    timeout,
    async (h) => {
      text = await h.evaluate((b) => b.closest(".notification-toast").querySelector(".notification-list-item-message").innerText);
    },
  );
  return text;
}

// clickFound clicks the element find (a page function of arg) returns,
// waiting at most wait ms for it; before, when given, is called with the
// element before the click, and what it returns (when not undefined) is
// clicked in its place. The workbench's toasts, dialogs and lists slide
// in and redraw: an element can be found before it has a box to click,
// or be replaced while clicked, so after such a failure it is looked for
// again.
export async function clickFound(page, find, arg, wait = timeout, before = undefined) {
  const end = Date.now() + wait;
  for (;;) {
    const h = (await page.waitForFunction(find, { timeout: Math.max(1, end - Date.now()) }, arg)).asElement();
    try {
      const target = (await before?.(h)) ?? h;
      await target.click();
      return;
    } catch (e) {
      if (Date.now() > end || !/not clickable|detached|not attached|Execution context was destroyed/i.test(String(e))) {
        throw e;
      }
      await sleep(250);
    }
  }
}

// waitForDiffEditor waits for the diff editor that the card's View diff
// opens; while none appears (a click on a loaded machine can land while
// the chat redraws), View diff is clicked again (opening a diff twice
// shows the same one).
export async function waitForDiffEditor(page, frame) {
  const end = Date.now() + timeout;
  for (;;) {
    const left = end - Date.now();
    const ok = await page
      .waitForSelector(".monaco-diff-editor .modified .view-lines", { timeout: Math.max(1, Math.min(15000, left)) })
      .then(() => true, () => false);
    if (ok) {
      return;
    }
    if (Date.now() >= end) {
      throw new Error("View Diff opened no diff editor in " + timeout + " ms");
    }
    await clickCard(frame, "view_diff").catch(() => {});
  }
}

// runDriver runs main({cfg, seen, browser, shot}) with the config named
// on the command line (written by ../e2e_test.go) and a headless
// Chromium, and prints one JSON object: seen, what main saw, with
// "failed" when it threw (after a screenshot failure-<name>.png).
// ctx.page is the page main works in (set it for the failure shot).
export async function runDriver(name, main) {
  const cfg = JSON.parse(readFileSync(process.argv[2], "utf8"));
  const require = createRequire(path.join(cfg.codeServerDir, "app") + "/");
  const puppeteer = require("puppeteer-core");
  const ctx = { cfg, seen: {}, browser: undefined, page: undefined };
  ctx.shot = (file) => ctx.page.screenshot({ path: path.join(cfg.shots, file) });
  try {
    ctx.browser = await puppeteer.launch({ executablePath: cfg.chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
    await main(ctx);
    process.stdout.write(JSON.stringify(ctx.seen));
  } catch (e) {
    if (ctx.page) await ctx.shot(`failure-${name}.png`).catch(() => undefined);
    process.stdout.write(JSON.stringify({ ...ctx.seen, failed: String(e && e.stack ? e.stack : e) }));
  } finally {
    await ctx.browser?.close();
  }
}

// pickRow picks the row of the open quick input labelled text (the
// first row that shows it when none is labelled exactly text), waiting
// at most wait ms for it.
async function pickRow(page, text, wait = timeout) {
  await clickFound(
    page,
    (t) => {
      const rows = [...document.querySelectorAll(".quick-input-list .monaco-list-row")];
      return rows.find((r) => r.querySelector(".label-name")?.innerText.trim() === t) ?? rows.find((r) => r.innerText.includes(t));
    },
    text,
    wait,
  );
}

// openPalette presses F1 until the quick input has the focus: F1 can be
// lost while the focus moves (to an editor, from a webview).
async function openPalette(page) {
  for (let attempt = 1; ; attempt++) {
    await page.keyboard.press("F1");
    const open = await page
      .waitForFunction(() => document.activeElement?.closest(".quick-input-widget") != null, { timeout: 5000 })
      .then(() => true, () => false);
    if (open) return;
    if (attempt === 5) throw new Error("F1 did not open the command palette");
  }
}

// quickPick types text into the quick input (F1; prefix ">" for a
// command, "" for a file) and picks its row. Keys typed while the
// palette is still taking the focus can be lost, leaving a filter that
// matches nothing, and a focus that moves late (to an editor an action
// just changed) closes the palette it opened: when the input or the row
// does not come, the palette is closed and the whole pick made again.
async function quickPick(page, prefix, text) {
  for (let attempt = 1; ; attempt++) {
    const last = attempt === 3;
    let quick;
    try {
      await openPalette(page);
      quick = await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: last ? timeout : 10000 });
      await quick.evaluate((e, p) => { e.value = p; }, prefix);
      await quick.type(text);
      await pickRow(page, text, last ? timeout : 20000);
      return;
    } catch (e) {
      if (last) {
        const typed = quick ? await quick.evaluate((e) => e.value).catch(() => "?") : "(no input)";
        throw new Error(`no quick input row ${JSON.stringify(text)} (input holds ${JSON.stringify(typed)}): ${e}`);
      }
      await page.keyboard.press("Escape");
    }
  }
}

// startChat opens the chat (openChat) for a runDriver main, once octet's
// status bar item is there, and returns the page and the chat's frame.
export async function startChat(ctx) {
  const { page, frame } = await openChat(ctx.browser, ctx.cfg);
  ctx.page = page;
  await page.waitForFunction(() => document.querySelector(".statusbar")?.innerText.includes("octet:"), { timeout });
  return { page, frame };
}

// dialogButton waits for the modal dialog with a button labelled label,
// clicks it, and returns the dialog's text.
export async function dialogButton(page, label) {
  let text = "";
  await clickFound(
    page,
    (l) => [...document.querySelectorAll(".monaco-dialog-box .monaco-button")].find((x) => x.textContent.trim() === l),
    label,
    timeout,
    async () => {
      text = await page.$eval(".monaco-dialog-box", (e) => e.innerText);
    },
  );
  return text;
}

// command runs a command of the command palette by its label.
export function command(page, label) {
  return quickPick(page, ">", label);
}

// setTheme switches the color theme (Preferences: Color Theme).
export async function setTheme(page, name) {
  await command(page, "Preferences: Color Theme");
  await pickRow(page, name);
}

// shotBoth saves <base>-light.png and <base>-dark.png of page in dir: as
// it is (light), then in the dark theme, then light again.
export async function shotBoth(page, dir, base) {
  const theme = async (name, cls) => {
    await setTheme(page, name);
    await page.waitForFunction((c) => document.querySelector(".monaco-workbench")?.classList.contains(c), { timeout }, cls);
    await sleep(1000); // the webviews restyle
  };
  await page.screenshot({ path: path.join(dir, `${base}-light.png`) });
  await theme("Dark Modern", "vs-dark");
  await page.screenshot({ path: path.join(dir, `${base}-dark.png`) });
  await theme("Light Modern", "vs");
}

// openFile opens a workspace file by its name (Quick Open).
export async function openFile(page, file) {
  await quickPick(page, "", file);
  await page.waitForFunction((f) => document.title.includes(f), { timeout }, file);
}

// logText is what the chat shows.
export function logText(frame) {
  return frame.evaluate(() => document.getElementById("log").innerText);
}

// sleep waits ms milliseconds.
export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
