import * as assert from "node:assert/strict";
import { test } from "node:test";
import { applyDiff, diffPath, reverseDiff } from "../diff";

const modify = "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";

test("applyDiff applies a modification and reverseDiff takes it back", () => {
  const after = applyDiff("one\ntwo\nthree\n", modify);
  assert.equal(after, "one\nTWO\nthree\n");
  assert.equal(applyDiff(after!, reverseDiff(modify)), "one\ntwo\nthree\n");
});

test("applyDiff keeps lines outside the hunks", () => {
  const d = "--- a/f\n+++ b/f\n@@ -3,1 +3,2 @@\n c\n+c2\n@@ -6 +7 @@\n-f\n+F\n";
  assert.equal(applyDiff("a\nb\nc\nd\ne\nf\ng\n", d), "a\nb\nc\nc2\nd\ne\nF\ng\n");
});

test("applyDiff refuses a diff that does not match the content", () => {
  assert.equal(applyDiff("one\nchanged\nthree\n", modify), undefined);
  assert.equal(applyDiff("one\n", "no hunks here"), undefined);
});

test("an added file comes from nothing and a deleted one goes to nothing", () => {
  const add = "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n";
  assert.equal(applyDiff("", add), "x\ny\n");
  assert.equal(diffPath(add), "n.txt");
  const del = reverseDiff(add);
  assert.equal(applyDiff("x\ny\n", del), "");
  assert.equal(diffPath(del), "n.txt");
});

test("a missing newline at the end is kept or added as the diff says", () => {
  const drop = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n";
  assert.equal(applyDiff("a\n", drop), "b");
  const add = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n";
  assert.equal(applyDiff("a", add), "a\n");
});

test("diffPath strips the a/ and b/ prefixes", () => {
  assert.equal(diffPath(modify), "a.txt");
  assert.equal(diffPath("--- a/dir/x.go\t2026\n+++ b/dir/x.go\t2026\n"), "dir/x.go");
});
