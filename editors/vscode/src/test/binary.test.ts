import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { resolveBinary } from "../binary";

function tmpBin(name: string, mode: number): { dir: string; file: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "octet-bin-"));
  const file = path.join(dir, name);
  fs.writeFileSync(file, "#!/bin/sh\n");
  fs.chmodSync(file, mode);
  return { dir, file };
}

test("the configured path wins; a bad one says so and how to install", () => {
  const { file } = tmpBin("octet", 0o755);
  assert.deepEqual(resolveBinary(file, "/nonexistent", "linux"), { path: file });
  const r = resolveBinary("/no/such/octet", "", "linux");
  assert.ok("error" in r && r.error.includes("octet.path") && r.error.includes("go install"), JSON.stringify(r));
});

test("octet is found on PATH, skipping files that are not executable", () => {
  const bad = tmpBin("octet", 0o644);
  const good = tmpBin("octet", 0o755);
  assert.deepEqual(resolveBinary("", `${bad.dir}::${good.dir}`, "linux"), { path: good.file });
  const r = resolveBinary("", bad.dir, "linux");
  assert.ok("error" in r && r.error.includes("not found on PATH") && r.error.includes("octet.path"), JSON.stringify(r));
});

test("a leading ~ is the home directory", () => {
  const { dir } = tmpBin("octet", 0o755);
  assert.deepEqual(resolveBinary("~/octet", "", "linux", dir), { path: path.join(dir, "octet") });
});
