// Shared by the code-server drivers (drive.mjs, drive-agents.mjs): open
// the workbench on a workspace, show the octet chat and find its webview.

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
