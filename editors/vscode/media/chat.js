// The chat webview's script: draws the HTML the extension sends and posts
// the user's actions back. It renders no Markdown or HTML of its own; the
// @-mention list and the pickers' options are text (textContent).
(function () {
  const vscode = acquireVsCodeApi();
  const log = document.getElementById("log");
  const prompt = document.getElementById("prompt");
  const send = document.getElementById("send");
  const cancel = document.getElementById("cancel");
  const followUp = document.getElementById("followUp");
  const stateEl = document.getElementById("state");
  const attachments = document.getElementById("attachments");
  const welcome = document.getElementById("welcome");
  const mentions = document.getElementById("mentions");
  const pickers = { model: document.getElementById("model"), effort: document.getElementById("effort"), mode: document.getElementById("mode") };
  let running = false;

  function atBottom() {
    return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
  }
  function fromHtml(html) {
    const t = document.createElement("template");
    t.innerHTML = html;
    return t.content.firstElementChild;
  }
  function setState(state) {
    running = state === "running" || state === "waiting_for_approval";
    stateEl.textContent = state === "waiting_for_approval" ? "waiting for approval" : state === "none" ? "" : state;
    send.textContent = running ? "Steer" : "Send";
    send.title = running ? "Send to the running model at its next step" : "";
    cancel.hidden = !running;
    followUp.hidden = !running;
  }
  function keepOpen(old, el) {
    // Keep a details element the user opened open across redraws.
    const was = old.querySelectorAll("details");
    const now = el.querySelectorAll("details");
    was.forEach((d, i) => {
      if (now[i] && d.open) now[i].open = true;
    });
  }
  // A redraw replaces items' elements: the focus and a reveal's outline
  // are put back on the new ones, so a card redrawn while the user reads
  // or tabs through it keeps both. The focused element is found again by
  // what it is (its tag and data attributes: the Deny button, a file's
  // link), so a button added before it does not take the focus; one with
  // none by its position.
  const focusable = "a[href], button, summary, select, input, textarea, [tabindex]";
  function focusIn() {
    const a = document.activeElement;
    const item = a && log.contains(a) ? a.closest("#log > [id]") : null;
    if (!item) return undefined;
    if (a === item) return { id: item.id, index: -1 };
    return { id: item.id, index: [...item.querySelectorAll(focusable)].indexOf(a), key: keyOf(item, a) };
  }
  // keyOf is a selector of a's tag and data attributes, with a's rank
  // among what it selects in item; none when a has no data attribute.
  function keyOf(item, a) {
    const attrs = [...a.attributes].filter((x) => x.name.startsWith("data-"));
    if (attrs.length === 0) return undefined;
    const sel = a.tagName.toLowerCase() + attrs.map((x) => `[${x.name}="${CSS.escape(x.value)}"]`).join("");
    return { sel, nth: [...item.querySelectorAll(sel)].indexOf(a) };
  }
  function refocus(f) {
    const item = f && document.getElementById(f.id);
    if (!item || item.contains(document.activeElement)) return;
    let target;
    if (f.key) {
      const same = item.querySelectorAll(f.key.sel);
      target = same[f.key.nth] || same[0];
    }
    if (!target && f.index >= 0) target = item.querySelectorAll(focusable)[f.index];
    (target || item).focus({ preventScroll: true });
  }
  let revealedId; // the item a reveal outlines, for 2 s
  let revealTimer;
  function outline(on) {
    const el = revealedId && document.getElementById(revealedId);
    if (el) el.classList.toggle("revealed", on);
  }

  window.addEventListener("message", (e) => {
    const m = e.data;
    const stick = atBottom();
    const f = focusIn();
    if (m.type === "reset") {
      log.textContent = "";
      for (const html of m.items) log.appendChild(fromHtml(html));
      welcome.innerHTML = m.welcome;
      setState(m.state);
    } else if (m.type === "upsert") {
      const el = fromHtml(m.html);
      const old = document.getElementById(m.id);
      if (old) {
        keepOpen(old, el);
        old.replaceWith(el);
      } else log.appendChild(el);
    } else if (m.type === "remove") {
      const old = document.getElementById(m.id);
      if (old) old.remove();
    } else if (m.type === "state") {
      setState(m.state);
    } else if (m.type === "attachments") {
      attachments.innerHTML = m.html;
      return;
    } else if (m.type === "pickers") {
      setPickers(m);
      return;
    } else if (m.type === "mentions") {
      if (m.id === mentionId) showMentions(m.items);
      return;
    } else if (m.type === "focus") {
      prompt.focus();
      return;
    } else if (m.type === "reveal") {
      // An approval's notification asked to show its card: bring it into
      // view and focus the card itself (never one of its buttons).
      const el = document.getElementById(m.id);
      if (el) {
        el.scrollIntoView({ block: "center" });
        outline(false);
        clearTimeout(revealTimer);
        revealedId = m.id;
        outline(true);
        el.focus({ preventScroll: true });
        revealTimer = setTimeout(() => {
          outline(false);
          revealedId = undefined;
        }, 2000);
      }
      return;
    }
    refocus(f);
    outline(revealedId !== undefined);
    welcome.hidden = log.childElementCount > 0;
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  });

  // The pickers under the prompt: the extension fills them and applies a
  // change (and fills them again with what is in effect).
  function setPickers(p) {
    const fill = (sel, choices, value) => {
      sel.textContent = "";
      for (const c of choices) {
        const o = document.createElement("option");
        o.value = c.value;
        o.textContent = c.label;
        if (c.title) o.title = c.title;
        sel.appendChild(o);
      }
      sel.value = value;
    };
    fill(pickers.model, p.models, p.model);
    fill(pickers.effort, p.efforts, p.effort);
    fill(pickers.mode, p.modes, p.mode);
    pickers.effort.disabled = p.effortNote !== "";
    pickers.effort.title = p.effortNote || "Reasoning effort";
  }
  for (const [what, sel] of Object.entries(pickers)) {
    sel.addEventListener("change", () => vscode.postMessage({ type: "pick", what, value: sel.value }));
  }

  // @-mentions: the word after an @ before the caret is a query the
  // extension completes with files and symbols; picking one puts its name
  // in the text and attaches it.
  let mentionId = 0;
  let mentionItems = [];
  let selected = 0;
  function mentionQuery() {
    const before = prompt.value.slice(0, prompt.selectionStart);
    const m = /(?:^|\s)@([^\s@]*)$/.exec(before);
    return m ? { query: m[1], at: before.length - m[1].length - 1 } : undefined;
  }
  function hideMentions() {
    mentions.hidden = true;
    mentionItems = [];
    mentionId++;
  }
  function showMentions(items) {
    mentionItems = items;
    selected = 0;
    mentions.textContent = "";
    if (items.length === 0) {
      mentions.hidden = true;
      return;
    }
    items.forEach((it, i) => {
      const row = document.createElement("div");
      row.className = `mention mention-${it.kind}`;
      row.setAttribute("role", "option");
      row.dataset.index = String(i);
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = it.label;
      const detail = document.createElement("span");
      detail.className = "detail";
      detail.textContent = it.detail;
      row.append(label, detail);
      mentions.appendChild(row);
    });
    mentions.hidden = false;
    markSelected();
  }
  function markSelected() {
    [...mentions.children].forEach((r, i) => r.setAttribute("aria-selected", String(i === selected)));
    mentions.children[selected]?.scrollIntoView({ block: "nearest" });
  }
  function pickMention(i) {
    const it = mentionItems[i];
    const q = mentionQuery();
    if (!it || !q) return hideMentions();
    const end = prompt.selectionStart;
    const name = "@" + it.label + " ";
    prompt.value = prompt.value.slice(0, q.at) + name + prompt.value.slice(end);
    prompt.selectionStart = prompt.selectionEnd = q.at + name.length;
    vscode.postMessage({ type: "pickMention", key: it.key });
    hideMentions();
    prompt.focus();
  }
  prompt.addEventListener("input", () => {
    const q = mentionQuery();
    if (!q) return hideMentions();
    vscode.postMessage({ type: "mention", id: ++mentionId, query: q.query });
  });
  mentions.addEventListener("mousedown", (e) => {
    const row = e.target.closest(".mention");
    if (row) {
      e.preventDefault();
      pickMention(Number(row.dataset.index));
    }
  });
  prompt.addEventListener("blur", () => setTimeout(hideMentions, 150));
  function submit(mode) {
    const text = prompt.value.trim();
    if (text === "") return;
    vscode.postMessage({ type: "send", text, mode });
    prompt.value = "";
  }
  document.getElementById("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    submit(running ? "steer" : "prompt");
  });
  prompt.addEventListener("keydown", (e) => {
    if (!mentions.hidden && mentionItems.length > 0) {
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        selected = (selected + (e.key === "ArrowDown" ? 1 : mentionItems.length - 1)) % mentionItems.length;
        markSelected();
        return;
      }
      if ((e.key === "Enter" || e.key === "Tab") && !e.isComposing) {
        e.preventDefault();
        pickMention(selected);
        return;
      }
      if (e.key === "Escape") {
        e.preventDefault();
        hideMentions();
        return;
      }
    }
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit(running && e.altKey ? "followUp" : running ? "steer" : "prompt");
    }
  });
  followUp.addEventListener("click", () => submit("followUp"));
  // Images pasted or dropped go to the extension, which checks them and
  // shows them above the prompt until the next prompt takes them.
  function attachFiles(files) {
    for (const f of files) {
      const r = new FileReader();
      r.onload = () => {
        const url = String(r.result);
        vscode.postMessage({ type: "attachImage", name: f.name || "pasted image", data: url.slice(url.indexOf(",") + 1) });
      };
      r.readAsDataURL(f);
    }
  }
  prompt.addEventListener("paste", (e) => {
    const files = [...(e.clipboardData?.files ?? [])].filter((f) => f.type.startsWith("image/"));
    if (files.length > 0) {
      e.preventDefault();
      attachFiles(files);
    }
  });
  const composer = document.getElementById("composer");
  // The composer is fixed at the bottom: the log ends above it, whatever
  // its height (chips, a taller prompt, wrapped pickers).
  new ResizeObserver(() => {
    const stick = atBottom();
    document.body.style.paddingBottom = `${composer.offsetHeight + 12}px`;
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  }).observe(composer);
  composer.addEventListener("dragover", (e) => e.preventDefault());
  composer.addEventListener("drop", (e) => {
    e.preventDefault();
    const files = [...(e.dataTransfer?.files ?? [])];
    if (files.length > 0) {
      attachFiles(files);
      return;
    }
    // Dragged from VS Code's explorer (with Shift): the files' URIs.
    const uris = (e.dataTransfer?.getData("text/uri-list") ?? "").split(/\r?\n/).filter((u) => u !== "" && !u.startsWith("#"));
    for (const uri of uris) vscode.postMessage({ type: "attachUri", uri });
  });
  attachments.addEventListener("click", (e) => {
    const b = e.target.closest("button[data-remove-attachment]");
    if (b) vscode.postMessage({ type: "removeAttachment", index: Number(b.dataset.removeAttachment) });
  });
  cancel.addEventListener("click", () => vscode.postMessage({ type: "cancel" }));
  log.addEventListener("click", (e) => {
    const t = e.target.closest("a, button");
    if (!t) return;
    const d = t.dataset;
    if (d.codeAction) {
      // A code block's Copy or Insert: the extension does it (the
      // clipboard, the editor), with the block's text as shown.
      e.preventDefault();
      const code = t.closest(".code-block")?.querySelector("pre code");
      if (code) vscode.postMessage({ type: "code", action: d.codeAction, text: code.textContent });
      if (d.codeAction === "copy") {
        t.textContent = "Copied";
        setTimeout(() => (t.textContent = "Copy"), 1500);
      }
    } else if (d.retryCancel) {
      e.preventDefault();
      vscode.postMessage({ type: "cancel" });
    } else if (d.agentStop) {
      e.preventDefault();
      vscode.postMessage({ type: "cancelAgent", runId: d.agentStop });
    } else if (d.approval) {
      e.preventDefault();
      vscode.postMessage({ type: "approval", digest: d.approval, decision: d.decision });
    } else if (d.action) {
      vscode.postMessage({ type: "action", action: d.action });
    } else if (t.classList.contains("open-diff")) {
      e.preventDefault();
      vscode.postMessage({ type: "openDiff", runId: d.run, path: d.path });
    } else if (d.file) {
      e.preventDefault();
      vscode.postMessage({ type: "openFile", path: d.file, line: d.line ? Number(d.line) : undefined });
    } else if (d.href) {
      e.preventDefault();
      vscode.postMessage({ type: "openHref", href: d.href });
    }
  });
  vscode.postMessage({ type: "ready" });
})();
