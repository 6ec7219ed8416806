import * as assert from "node:assert/strict";
import { test } from "node:test";
import { parseFileRef, renderMarkdown } from "../markdown";

test("HTML in the text is escaped, never passed through", () => {
  const html = renderMarkdown('<img src=x onerror="alert(1)"> **b** `<b>`');
  assert.ok(!html.includes("<img"), html);
  assert.ok(html.includes("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;"), html);
  assert.ok(html.includes("<strong>b</strong>"), html);
  assert.ok(html.includes("<code>&lt;b&gt;</code>"), html);
});

test("links never navigate the webview; only http(s) and file references become links", () => {
  const html = renderMarkdown("[x](javascript:alert(1)) [doc](https://example.com/a) [f](src/a.go)");
  assert.ok(!html.includes("javascript:"), html);
  assert.ok(html.includes('data-href="https://example.com/a"'), html);
  assert.ok(html.includes('data-file="src/a.go"'), html);
  assert.ok(!/\shref="(?!#")/.test(html), html);
});

test("code spans naming files are clickable, with the line", () => {
  const html = renderMarkdown("see `server/run.go:42` and `go test`");
  assert.ok(html.includes('data-file="server/run.go" data-line="42"'), html);
  assert.ok(html.includes("<code>go test</code>") && !html.includes('data-file="go test"'), html);
  assert.deepEqual(parseFileRef("a.ts:3:5"), { path: "a.ts", line: 3 });
  assert.equal(parseFileRef("https://x.y/a.go"), undefined);
});

test("fenced code, headings, lists and an unfinished fence while streaming", () => {
  const html = renderMarkdown("# T\n- a\n- b\n\n1. one\n\n```go\nx := <-c\n```\n\n```\nopen");
  assert.ok(html.includes("<h1>T</h1>"), html);
  assert.ok(html.includes("<ul><li>a</li><li>b</li></ul>"), html);
  assert.ok(html.includes("<ol><li>one</li></ol>"), html);
  assert.ok(html.includes('<pre><code class="language-go">x := &lt;-c</code></pre>'), html);
  assert.ok(html.includes("<pre><code>open</code></pre>"), html);
});

test("underscores inside words are not emphasis", () => {
  assert.ok(!renderMarkdown("snake_case_name").includes("<em>"));
  assert.ok(renderMarkdown("an _important_ word").includes("<em>important</em>"));
});
