// Markdown for the chat view, rendered by markdown-it (CommonMark with
// GitHub's tables and strikethrough) in the extension host; the webview
// only inserts the HTML. Raw HTML in the text is escaped, never passed
// through; links never navigate the webview: they carry data-href (http,
// https) or data-file (a workspace path) for the extension to open, and
// anything else stays text; images are never loaded (their alt text
// stands for them). Fenced code is highlighted by highlight.js (its
// common languages) and gets Copy and Insert buttons.

import hljs from "highlight.js/lib/common";
import MarkdownIt = require("markdown-it");

type Token = MarkdownIt.Token;

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

function fileLinkOpen(ref: { path: string; line?: number }): string {
  const line = ref.line === undefined ? "" : ` data-line="${ref.line}"`;
  return `<a href="#" class="file" data-file="${escapeHtml(ref.path)}"${line}>`;
}

/** linkOpen is the opening tag a link target gets, or "" to keep it text. */
function linkOpen(target: string): string {
  if (/^https?:\/\//i.test(target)) {
    return `<a href="#" data-href="${escapeHtml(target)}">`;
  }
  const ref = parseFileRef(target);
  return ref ? fileLinkOpen(ref) : "";
}

// highlighted keeps the last highlighted code blocks: while an answer
// streams it is rendered again at each delta, its finished blocks unchanged.
const highlighted = new Map<string, string>();
const highlightedMax = 64;

/** highlight returns code as HTML, highlighted when lang is a language highlight.js knows. */
export function highlight(code: string, lang: string): string {
  if (lang === "" || hljs.getLanguage(lang) === undefined) {
    return escapeHtml(code);
  }
  const key = `${lang}\u0000${code}`;
  let html = highlighted.get(key);
  if (html === undefined) {
    html = hljs.highlight(code, { language: lang, ignoreIllegals: true }).value;
    highlighted.set(key, html);
    if (highlighted.size > highlightedMax) {
      highlighted.delete(highlighted.keys().next().value as string);
    }
  }
  return html;
}

/** codeBlock is a code block with its language, Copy and Insert buttons. */
function codeBlock(code: string, info: string): string {
  const lang = /^[\w+\-.#]*/.exec(info.trim())?.[0] ?? "";
  const cls = lang === "" ? "hljs" : `hljs language-${escapeHtml(lang)}`;
  return (
    `<div class="code-block"><div class="code-head"><span class="code-lang">${escapeHtml(lang)}</span>` +
    `<button type="button" class="code-action" data-code-action="copy" title="Copy the code">Copy</button>` +
    `<button type="button" class="code-action" data-code-action="insert" title="Insert the code at the cursor of the editor">Insert</button></div>` +
    `<pre><code class="${cls}">${highlight(code.replace(/\n$/, ""), lang)}</code></pre></div>\n`
  );
}

/** closing finds the index of the token closing tokens[open]. */
function closing(tokens: Token[], open: number, type: string): number {
  for (let i = open + 1; i < tokens.length; i++) {
    if (tokens[i].type === type && tokens[i].level === tokens[open].level) {
      return i;
    }
  }
  return -1;
}

function newRenderer(): MarkdownIt {
  const md = new MarkdownIt({ html: false, linkify: true, breaks: true });
  const r = md.renderer.rules;
  r.fence = (tokens, i) => codeBlock(tokens[i].content, tokens[i].info);
  r.code_block = (tokens, i) => codeBlock(tokens[i].content, "");
  r.code_inline = (tokens, i) => {
    const code = tokens[i].content;
    const html = `<code>${escapeHtml(code)}</code>`;
    const ref = parseFileRef(code);
    return ref ? `${fileLinkOpen(ref)}${html}</a>` : html;
  };
  r.link_open = (tokens, i) => {
    const open = linkOpen(tokens[i].attrGet("href") ?? "");
    if (open === "") {
      const end = closing(tokens, i, "link_close");
      if (end >= 0) {
        tokens[end].meta = { text: true };
      }
    }
    return open;
  };
  r.link_close = (tokens, i) => (tokens[i].meta?.text ? "" : "</a>");
  r.image = (tokens, i) => {
    const t = tokens[i];
    const alt = escapeHtml(t.children ? md.renderer.renderInlineAsText(t.children, md.options, {}) : t.content);
    const src = t.attrGet("src") ?? "";
    return /^https?:\/\//i.test(src) ? `<a href="#" data-href="${escapeHtml(src)}">${alt || escapeHtml(src)}</a>` : alt;
  };
  r.table_open = () => `<div class="table-wrap"><table>\n`;
  r.table_close = () => `</table></div>\n`;
  return md;
}

const md = newRenderer();

/** renderMarkdown renders Markdown text (possibly incomplete, while streaming) as HTML. */
export function renderMarkdown(src: string): string {
  return md.render(src);
}
