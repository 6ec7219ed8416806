// The chat webview's script: draws the HTML the extension sends and posts
// the user's actions back. It renders no text itself.
(function () {
  const vscode = acquireVsCodeApi();
  const log = document.getElementById("log");
  const prompt = document.getElementById("prompt");
  const send = document.getElementById("send");
  const cancel = document.getElementById("cancel");
  const followUp = document.getElementById("followUp");
  const stateEl = document.getElementById("state");
  const attachments = document.getElementById("attachments");
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
  window.addEventListener("message", (e) => {
    const m = e.data;
    const stick = atBottom();
    if (m.type === "reset") {
      log.textContent = "";
      for (const html of m.items) log.appendChild(fromHtml(html));
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
    } else if (m.type === "reveal") {
      // An approval's notification asked to show its card: bring it into
      // view and focus the card itself (never one of its buttons).
      const el = document.getElementById(m.id);
      if (el) {
        el.scrollIntoView({ block: "center" });
        el.classList.add("revealed");
        el.focus({ preventScroll: true });
        setTimeout(() => el.classList.remove("revealed"), 2000);
      }
      return;
    }
    if (stick) window.scrollTo(0, document.body.scrollHeight);
  });
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
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      submit(running ? "steer" : "prompt");
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
    const b = e.target.closest("button[data-remove-image]");
    if (b) vscode.postMessage({ type: "removeImage", index: Number(b.dataset.removeImage) });
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
