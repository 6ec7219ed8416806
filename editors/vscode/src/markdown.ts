// A small Markdown renderer for the chat view. Everything is escaped
// first; the only markup it emits is its own (no raw HTML passes through),
// and links never navigate the webview: they carry data-href (http, https)
// or data-file (a workspace path) for the extension to open.

/** escapeHtml escapes text for HTML element content and attribute values. */
export function escapeHtml(s: string): string {
  return s
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

// A path-like token: a/b.go, ./x.ts, main.go:12, src/x.ts:3:5.
const fileRef = /^(?:\.{0,2}\/)?[\w.\-]+(?:\/[\w.\-]+)*\.[A-Za-z0-9]{1,8}(?::(\d+)(?::\d+)?)?$/;

/** parseFileRef returns the path and line of a file reference, or undefined. */
export function parseFileRef(s: string): { path: string; line?: number } | undefined {
  if (!fileRef.test(s) || s.includes("://")) {
    return undefined;
  }
  const m = /^(.*?)(?::(\d+)(?::\d+)?)?$/.exec(s);
  if (!m) {
    return undefined;
  }
  return m[2] === undefined ? { path: m[1] } : { path: m[1], line: Number(m[2]) };
}

function fileLink(ref: { path: string; line?: number }, label: string): string {
  const line = ref.line === undefined ? "" : ` data-line="${ref.line}"`;
  return `<a href="#" class="file" data-file="${escapeHtml(ref.path)}"${line}>${label}</a>`;
}

function inline(text: string): string {
  // Split out code spans first: nothing inside them is formatted.
  const parts = text.split(/(`+[^`]*`+)/);
  return parts
    .map((part, i) => {
      if (i % 2 === 1) {
        const code = part.replace(/^`+|`+$/g, "");
        const ref = parseFileRef(code);
        const html = `<code>${escapeHtml(code)}</code>`;
        return ref ? fileLink(ref, html) : html;
      }
      return formatSpan(part);
    })
    .join("");
}

function formatSpan(text: string): string {
  let out = "";
  const link = /\[([^\]]+)\]\(([^)\s]+)\)/g;
  let last = 0;
  for (let m = link.exec(text); m !== null; m = link.exec(text)) {
    out += emphasis(escapeHtml(text.slice(last, m.index)));
    out += linkHtml(m[1], m[2]);
    last = m.index + m[0].length;
  }
  return out + emphasis(escapeHtml(text.slice(last)));
}

function linkHtml(label: string, target: string): string {
  const l = emphasis(escapeHtml(label));
  if (/^https?:\/\//i.test(target)) {
    return `<a href="#" data-href="${escapeHtml(target)}">${l}</a>`;
  }
  const ref = parseFileRef(target.replace(/^file:\/\//, ""));
  return ref ? fileLink(ref, l) : l;
}

function emphasis(escaped: string): string {
  return escaped
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w*])\*([^*\s][^*]*)\*(?!\w)/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_([^_\s][^_]*)_(?!\w)/g, "$1<em>$2</em>");
}

/** renderMarkdown renders Markdown text (possibly incomplete, while streaming) as HTML. */
export function renderMarkdown(src: string): string {
  const lines = src.replace(/\r\n/g, "\n").split("\n");
  const out: string[] = [];
  let para: string[] = [];
  let list: { ordered: boolean; items: string[] } | undefined;
  const flushPara = () => {
    if (para.length > 0) {
      out.push(`<p>${para.map(inline).join("<br>")}</p>`);
      para = [];
    }
  };
  const flushList = () => {
    if (list) {
      const tag = list.ordered ? "ol" : "ul";
      out.push(`<${tag}>${list.items.map((i) => `<li>${inline(i)}</li>`).join("")}</${tag}>`);
      list = undefined;
    }
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```+|~~~+)\s*([\w+\-.]*)/.exec(line);
    if (fence) {
      flushPara();
      flushList();
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i].trimStart().startsWith(fence[1])) {
        body.push(lines[i]);
        i++;
      }
      const lang = fence[2] ? ` class="language-${escapeHtml(fence[2])}"` : "";
      out.push(`<pre><code${lang}>${escapeHtml(body.join("\n"))}</code></pre>`);
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    const bullet = /^\s*[-*+]\s+(.*)$/.exec(line);
    const numbered = /^\s*\d+[.)]\s+(.*)$/.exec(line);
    if (heading) {
      flushPara();
      flushList();
      const n = heading[1].length;
      out.push(`<h${n}>${inline(heading[2])}</h${n}>`);
    } else if (bullet || numbered) {
      flushPara();
      const ordered = numbered !== null && bullet === null;
      if (list && list.ordered !== ordered) {
        flushList();
      }
      list ??= { ordered, items: [] };
      list.items.push((bullet ?? numbered)![1]);
    } else if (/^\s*>\s?/.test(line)) {
      flushPara();
      flushList();
      out.push(`<blockquote>${inline(line.replace(/^\s*>\s?/, ""))}</blockquote>`);
    } else if (line.trim() === "") {
      flushPara();
      flushList();
    } else {
      flushList();
      para.push(line);
    }
  }
  flushPara();
  flushList();
  return out.join("\n");
}
