import * as assert from "node:assert/strict";
import { test } from "node:test";
import { ChatModel } from "../chatModel";
import { addImage, imageLabel, imageLimits, promptContext, sniff } from "../images";
import { attachmentsHtml, renderItem } from "../render";

const bytes = (s: string) => Uint8Array.from([...s].map((c) => c.charCodeAt(0)));
const png = bytes("\x89PNG\r\n\x1a\n\x00\x00");

test("images are recognized by their bytes", () => {
  assert.equal(sniff(png), "image/png");
  assert.equal(sniff(bytes("\xff\xd8\xff\xe0")), "image/jpeg");
  assert.equal(sniff(bytes("GIF89a..")), "image/gif");
  assert.equal(sniff(bytes("RIFF\x00\x00\x00\x00WEBPVP8 ")), "image/webp");
  assert.equal(sniff(bytes("<svg>")), "");
  assert.equal(sniff(bytes("RIFF\x00\x00\x00\x00WAVE")), "");
});

test("a prompt's images: checked, bounded, sent as image context", () => {
  let pending = addImage([], "shot.png", png);
  assert.ok(Array.isArray(pending));
  assert.deepEqual(promptContext(pending), [{ type: "image", mimeType: "image/png", data: Buffer.from(png).toString("base64") }]);
  assert.match(String(addImage(pending, "notes.txt", bytes("hello"))), /notes\.txt is not a PNG, JPEG, GIF or WebP image/);
  const big = new Uint8Array(imageLimits.bytes + 1);
  big.set(png);
  assert.match(String(addImage(pending, "big.png", big)), /over 20 MiB/);
  for (let i = 1; i < imageLimits.count; i++) {
    const r = addImage(pending, `p${i}.png`, png);
    assert.ok(Array.isArray(r));
    pending = r;
  }
  assert.match(String(addImage(pending, "ninth.png", png)), /at most 8 images/);
  assert.equal(imageLabel("shot.png", 12_345), "shot.png, 12 KB");
  assert.equal(imageLabel("big.png", 3 * 1024 * 1024), "big.png, 3.0 MB");
});

test("attached images are chips (escaped) with a remove button; a prompt shows its images", () => {
  const html = attachmentsHtml([{ label: "<b>x</b>.png, 1 KB", kind: "image" }]);
  assert.match(html, /&lt;b&gt;x&lt;\/b&gt;\.png/);
  assert.match(html, /data-remove-attachment="0"/);
  const m = new ChatModel();
  m.loadTranscript([{ id: "e1", type: "user", text: "look", images: [{ mimeType: "image/png", bytes: 2048, sha256: "ab" }] }]);
  const u = m.items[0];
  assert.ok(u.kind === "user");
  assert.match(renderItem(u), /image-chip"[^>]*>image\/png, 2 KB/);
});
