import * as assert from "node:assert/strict";
import { test } from "node:test";
import { parseFileRef, renderMarkdown } from "../markdown";

test("HTML in the text is escaped, never passed through", () => {
  const html = renderMarkdown('<img src=x onerror="alert(1)"> **b** `<b>`\n\n<script>alert(1)</script>');
  assert.ok(!html.includes("<img") && !html.includes("<script"), html);
  assert.ok(html.includes("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"), html);
  assert.ok(html.includes("<strong>b</strong>"), html);
  assert.ok(html.includes("<code>&lt;b&gt;</code>"), html);
});

test("links never navigate the webview; only http(s) and file references become links", () => {
  const html = renderMarkdown("[x](javascript:alert(1)) [doc](https://example.com/a) [f](src/a.go) [m](mailto:a@b.c) [d](data:text/html,hi) https://bare.example/x");
  assert.ok(!/(href|src)="(javascript|data|mailto)/.test(html), html);
  assert.ok(html.includes('data-href="https://example.com/a"'), html);
  assert.ok(html.includes('data-href="https://bare.example/x"'), "a bare URL is a link too: " + html);
  assert.ok(html.includes('data-file="src/a.go"'), html);
  assert.ok(!html.includes('data-href="mailto') && !html.includes('data-href="data:'), html);
  assert.ok(!/\shref="(?!#")/.test(html), html);
  assert.equal((html.match(/<a /g) ?? []).length, (html.match(/<\/a>/g) ?? []).length, "every link that opens closes");
});

test("images are never loaded: their alt text stands for them", () => {
  const html = renderMarkdown("![a chart](https://evil.example/x.png) ![local](x.png)");
  assert.ok(!html.includes("<img"), html);
  assert.ok(html.includes('<a href="#" data-href="https://evil.example/x.png">a chart</a>'), html);
  assert.ok(html.includes("local"), html);
});

test("code spans naming files are clickable, with the line", () => {
  const html = renderMarkdown("see `server/run.go:42` and `go test`");
  assert.ok(html.includes('data-file="server/run.go" data-line="42"'), html);
  assert.ok(html.includes("<code>go test</code>") && !html.includes('data-file="go test"'), html);
  assert.deepEqual(parseFileRef("a.ts:3:5"), { path: "a.ts", line: 3 });
  assert.equal(parseFileRef("https://x.y/a.go"), undefined);
});

test("tables, nested lists and headings", () => {
  const html = renderMarkdown("# T\n\n| a | b |\n|---|:-:|\n| 1 | `x` |\n\n- one\n  - nested\n    1. deep\n- two\n");
  assert.match(html, /<h1>T<\/h1>/);
  assert.match(html, /<div class="table-wrap"><table>\s*<thead>\s*<tr>\s*<th>a<\/th>/);
  assert.match(html, /<td>1<\/td>\s*<td style="text-align:center"><code>x<\/code><\/td>/);
  assert.match(html, /<li>one\s*<ul>\s*<li>nested\s*<ol>\s*<li>deep<\/li>/, "nested lists stay nested: " + html);
});

test("fenced code is highlighted, escaped, with Copy and Insert, also unfinished while streaming", () => {
  const html = renderMarkdown('```go\nfunc main() { s := "<x>" }\n```\n\n```\nopen');
  assert.match(html, /<div class="code-block"><div class="code-head"><span class="code-lang">go<\/span>/);
  assert.match(html, /data-code-action="copy"/);
  assert.match(html, /data-code-action="insert"/);
  assert.match(html, /<code class="hljs language-go">(<span class="hljs-function">)?<span class="hljs-keyword">func<\/span>/);
  assert.ok(html.includes("&quot;&lt;x&gt;&quot;") && !html.includes('"<x>"'), html);
  assert.match(html, /<code class="hljs">open<\/code>/);
});

test("an unknown language and a hostile info string are plain, escaped code", () => {
  const html = renderMarkdown('```nosuchlang" onclick="x\n<b>\n```');
  assert.ok(!html.includes('onclick="x'), html);
  assert.match(html, /<code class="hljs language-nosuchlang">&lt;b&gt;<\/code>/);
});

test("underscores inside words are not emphasis; single newlines break lines", () => {
  assert.ok(!renderMarkdown("snake_case_name").includes("<em>"));
  assert.ok(renderMarkdown("an _important_ word").includes("<em>important</em>"));
  assert.match(renderMarkdown("line one\nline two"), /line one<br>\s*line two/);
});
