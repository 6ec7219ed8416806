import * as assert from "node:assert/strict";
import { test } from "node:test";
import { Debouncer, toLsp } from "../diagnostics";

test("an editor diagnostic becomes LSP's: severity one up, the code's value, no empty source", () => {
  const range = { start: { line: 1, character: 6 }, end: { line: 1, character: 7 } };
  assert.deepEqual(toLsp({ range, severity: 0, code: { value: 2322 }, source: "ts", message: "Type 'string' is not assignable to type 'number'." }), {
    range, severity: 1, code: 2322, source: "ts", message: "Type 'string' is not assignable to type 'number'.",
  });
  assert.deepEqual(toLsp({ range, severity: 3, message: "unused", source: "" }), { range, severity: 4, message: "unused" });
  assert.equal(toLsp({ range, severity: 1, code: "E1", message: "m" }).code, "E1");
});

test("diagnostics go once a document's reports have settled, each document on its own", async () => {
  const sent: string[] = [];
  const d = new Debouncer((k) => sent.push(k), 30);
  d.schedule("a");
  d.schedule("b");
  await new Promise((r) => setTimeout(r, 10));
  d.schedule("a");
  await new Promise((r) => setTimeout(r, 25));
  assert.deepEqual(sent, ["b"], "a was reported again: it waits");
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(sent, ["b", "a"]);
  d.schedule("c");
  d.dispose();
  await new Promise((r) => setTimeout(r, 40));
  assert.deepEqual(sent, ["b", "a"], "nothing is sent after dispose");
});
