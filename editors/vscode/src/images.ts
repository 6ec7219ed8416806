// Images attached to a prompt (pasted or dropped into the chat): checked
// by their bytes as octet checks them (PNG, JPEG, GIF, WebP; 20 MiB each,
// 8 per prompt, 40 MiB together) and sent as octet/prompt context
// {type: "image", mimeType, data}. It knows nothing of VS Code.

/** An image waiting to go with the next prompt. */
export interface PromptImage {
  /** name is what the chat calls it (the file's name, or "pasted image"). */
  name: string;
  mimeType: string;
  /** data is the image in standard base64. */
  data: string;
  bytes: number;
}

export const imageLimits = { bytes: 20 * 1024 * 1024, count: 8, total: 40 * 1024 * 1024 } as const;

/** sniff is the MIME type of an image's leading bytes, or "". */
export function sniff(b: Uint8Array): string {
  const at = (s: string, off = 0) => [...s].every((c, i) => b[off + i] === c.charCodeAt(0));
  if (at("\x89PNG\r\n\x1a\n")) {
    return "image/png";
  }
  if (at("\xff\xd8\xff")) {
    return "image/jpeg";
  }
  if (at("GIF87a") || at("GIF89a")) {
    return "image/gif";
  }
  if (at("RIFF") && at("WEBP", 8)) {
    return "image/webp";
  }
  return "";
}

/**
 * addImage returns the pending images with one more (the bytes decide
 * its type), or why it cannot be added.
 */
export function addImage(pending: PromptImage[], name: string, bytes: Uint8Array): PromptImage[] | string {
  const mimeType = sniff(bytes);
  if (mimeType === "") {
    return `${name} is not a PNG, JPEG, GIF or WebP image.`;
  }
  if (bytes.length > imageLimits.bytes) {
    return `${name} is over 20 MiB; attach a smaller image.`;
  }
  if (pending.length >= imageLimits.count) {
    return `A prompt takes at most ${imageLimits.count} images.`;
  }
  if (pending.reduce((n, i) => n + i.bytes, 0) + bytes.length > imageLimits.total) {
    return "A prompt's images take at most 40 MiB together.";
  }
  const data = Buffer.from(bytes).toString("base64");
  return [...pending, { name, mimeType, data, bytes: bytes.length }];
}

/** promptContext is the octet/prompt context of the images. */
export function promptContext(images: PromptImage[]): { type: "image"; mimeType: string; data: string }[] {
  return images.map((i) => ({ type: "image", mimeType: i.mimeType, data: i.data }));
}

/** imageLabel names an image for the chat ("shot.png, 12 KB"). */
export function imageLabel(name: string, bytes: number): string {
  const size = bytes >= 1024 * 1024 ? `${(bytes / (1024 * 1024)).toFixed(1)} MB` : `${Math.max(1, Math.round(bytes / 1024))} KB`;
  return `${name}, ${size}`;
}
