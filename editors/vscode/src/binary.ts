// Finding the octet binary: the octet.path setting, else `octet` on PATH.

import * as fs from "node:fs";
import * as path from "node:path";

/** How to install octet, shown when the binary is missing. */
export const installAdvice =
  "Install octet (`go install github.com/octet-agent/octet/cmd/octet@latest`, or unpack a release archive) and put it on PATH, " +
  "or set \"octet.path\" to the binary.";

/** The result of resolveBinary: a path, or why there is none. */
export type Resolved = { path: string } | { error: string };

function isExecutable(p: string, platform: NodeJS.Platform): boolean {
  try {
    const st = fs.statSync(p);
    if (!st.isFile()) {
      return false;
    }
    if (platform === "win32") {
      return true;
    }
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * resolveBinary finds octet: the configured path (a leading ~ is the home
 * directory), else the first `octet` (octet.exe on Windows) in the PATH
 * list. The error says what was tried and how to install octet.
 */
export function resolveBinary(
  configured: string,
  envPath: string | undefined,
  platform: NodeJS.Platform = process.platform,
  home: string = process.env.HOME ?? process.env.USERPROFILE ?? "",
): Resolved {
  const conf = configured.trim();
  if (conf !== "") {
    const p = conf.startsWith("~/") || conf === "~" ? path.join(home, conf.slice(1)) : conf;
    if (isExecutable(p, platform)) {
      return { path: p };
    }
    return { error: `octet.path is set to ${JSON.stringify(conf)}, which is not an executable file. ${installAdvice}` };
  }
  const name = platform === "win32" ? "octet.exe" : "octet";
  const sep = platform === "win32" ? ";" : ":";
  for (const dir of (envPath ?? "").split(sep)) {
    if (dir === "") {
      continue;
    }
    const p = path.join(dir, name);
    if (isExecutable(p, platform)) {
      return { path: p };
    }
  }
  return { error: `octet was not found on PATH. ${installAdvice}` };
}
