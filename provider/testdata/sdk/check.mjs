// Parses provider streams with the official SDKs' stream parsers.
//
// Usage: node check.mjs BASE_URL WIRE...
//
// For each WIRE argument ("responses", "chat" or "anthropic") one
// streaming request is made to BASE_URL (the scripted server, which
// answers each with its next turn) through the SDK's streaming helper,
// with retries off, and one JSON line is printed: {"ok":true,"final":…}
// with the SDK's accumulated final object (plus the reasoning text the
// chunks carried, which the chat helper does not accumulate), or
// {"ok":false,"error":{name,status,type,retryAfter,message}}.
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const [baseURL, ...wires] = process.argv.slice(2);
const openai = new OpenAI({ baseURL, apiKey: 'sk-sdk-check', maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: baseURL.replace(/\/v1$/, ''), apiKey: 'sk-ant-sdk-check', maxRetries: 0 });

async function chat() {
  const stream = openai.chat.completions.stream({
    model: 'scripted',
    messages: [{ role: 'user', content: 'hi' }],
    stream_options: { include_usage: true },
  });
  let reasoning = '';
  stream.on('chunk', (c) => {
    const d = c.choices?.[0]?.delta ?? {};
    reasoning += d.reasoning_content ?? d.reasoning ?? '';
  });
  const final = await stream.finalChatCompletion();
  return { ...final, reasoning };
}

async function responses() {
  const stream = openai.responses.stream({ model: 'scripted', input: 'hi' });
  return await stream.finalResponse();
}

async function messages() {
  const stream = anthropic.messages.stream({
    model: 'scripted',
    max_tokens: 1024,
    messages: [{ role: 'user', content: 'hi' }],
  });
  return await stream.finalMessage();
}

const run = { chat, responses, anthropic: messages };

for (const w of wires) {
  let line;
  try {
    line = { ok: true, final: await run[w]() };
  } catch (e) {
    line = {
      ok: false,
      error: {
        name: e?.constructor?.name ?? typeof e,
        status: e?.status ?? 0,
        type: e?.error?.error?.type ?? e?.error?.type ?? e?.type ?? '',
        retryAfter: e?.headers?.get?.('retry-after') ?? '',
        message: String(e?.message ?? e),
      },
    };
  }
  process.stdout.write(JSON.stringify(line) + '\n');
}
