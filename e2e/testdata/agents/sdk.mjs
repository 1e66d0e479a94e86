// Runs the official Node SDKs (openai, @anthropic-ai/sdk, @google/genai)
// with their default options against a Tollgate node, for one route, and
// prints one JSON object: case name -> "ok" or the error. Used by
// e2e/sdk_node_test.go. Environment: TOLLGATE_URL (http://host:port),
// TOLLGATE_KEY, ROUTE (the model), EMBED_ROUTE (optional: an embeddings
// route).
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { GoogleGenAI } from '@google/genai';

const url = process.env.TOLLGATE_URL;
const key = process.env.TOLLGATE_KEY;
const model = process.env.ROUTE;
const embedModel = process.env.EMBED_ROUTE;

const oa = new OpenAI({ apiKey: key, baseURL: url + '/v1', maxRetries: 0, timeout: 20000 });
const an = new Anthropic({ apiKey: key, baseURL: url, maxRetries: 0, timeout: 20000 });
const gg = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: url, timeout: 20000 } });

const weather = {
  type: 'object',
  properties: { city: { type: 'string', description: 'the city' } },
  required: ['city'],
};
const ask = 'What is the weather in Paris?';

function check(cond, what) {
  if (!cond) throw new Error(what);
}

const cases = {
  async 'openai/chat'() {
    const c = await oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello' }] });
    check(c.choices[0].message.content.length > 0, 'no content: ' + JSON.stringify(c));
  },
  async 'openai/chat-stream'() {
    const s = await oa.chat.completions.create({ model, stream: true, messages: [{ role: 'user', content: 'Hello' }] });
    let text = '';
    for await (const ch of s) text += ch.choices[0]?.delta?.content ?? '';
    check(text.length > 0, 'no streamed text');
  },
  async 'openai/chat-tools'() {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: weather } }];
    const c = await oa.chat.completions.create({ model, tools, messages: [{ role: 'user', content: ask }] });
    const m = c.choices[0].message;
    check(m.tool_calls?.[0]?.function?.name === 'get_weather', 'no tool call: ' + JSON.stringify(c));
    const c2 = await oa.chat.completions.create({
      model, tools,
      messages: [{ role: 'user', content: ask }, m, { role: 'tool', tool_call_id: m.tool_calls[0].id, content: 'Sunny' }],
    });
    check(c2.choices[0].message.content.startsWith('Tool result received'), 'after the result: ' + JSON.stringify(c2));
  },
  async 'openai/responses'() {
    const r = await oa.responses.create({ model, input: 'Hello' });
    check(r.output_text.length > 0 && r.status === 'completed', 'response: ' + JSON.stringify(r));
  },
  async 'openai/responses-stream'() {
    const s = oa.responses.stream({ model, input: 'Hello' });
    let deltas = '';
    for await (const ev of s) if (ev.type === 'response.output_text.delta') deltas += ev.delta;
    const r = await s.finalResponse();
    check(deltas.length > 0 && r.output_text === deltas, `deltas ${deltas} final ${r.output_text}`);
  },
  async 'openai/responses-tools'() {
    const tools = [{ type: 'function', name: 'get_weather', parameters: weather, strict: false }];
    const r = await oa.responses.create({ model, tools, input: ask });
    const call = r.output.find((o) => o.type === 'function_call');
    check(call?.name === 'get_weather', 'no call: ' + JSON.stringify(r));
    const r2 = await oa.responses.create({
      model, tools,
      input: [{ role: 'user', content: ask }, call, { type: 'function_call_output', call_id: call.call_id, output: 'Sunny' }],
    });
    check(r2.output_text.startsWith('Tool result received'), 'after the result: ' + JSON.stringify(r2));
  },
  async 'anthropic/messages'() {
    const m = await an.messages.create({ model, max_tokens: 256, messages: [{ role: 'user', content: 'Hello' }] });
    check(m.content[0].type === 'text' && m.content[0].text.length > 0, 'message: ' + JSON.stringify(m));
  },
  async 'anthropic/messages-stream'() {
    const s = an.messages.stream({ model, max_tokens: 256, messages: [{ role: 'user', content: 'Hello' }] });
    const m = await s.finalMessage();
    check(m.content[0].text.length > 0 && m.stop_reason === 'end_turn', 'message: ' + JSON.stringify(m));
  },
  async 'anthropic/messages-tools'() {
    const tools = [{ name: 'get_weather', input_schema: weather }];
    const m = await an.messages.create({ model, max_tokens: 256, tools, messages: [{ role: 'user', content: ask }] });
    const use = m.content.find((c) => c.type === 'tool_use');
    check(use?.name === 'get_weather', 'no tool_use: ' + JSON.stringify(m));
    const m2 = await an.messages.create({
      model, max_tokens: 256, tools,
      messages: [{ role: 'user', content: ask }, { role: 'assistant', content: m.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny' }] }],
    });
    check(m2.content[0].text.startsWith('Tool result received'), 'after the result: ' + JSON.stringify(m2));
  },
  async 'genai/generate'() {
    const r = await gg.models.generateContent({ model, contents: 'Hello' });
    check(r.text.length > 0, 'answer: ' + JSON.stringify(r));
  },
  async 'genai/generate-stream'() {
    let text = '';
    for await (const ch of await gg.models.generateContentStream({ model, contents: 'Hello' })) text += ch.text ?? '';
    check(text.length > 0, 'no streamed text');
  },
  async 'genai/generate-tools'() {
    const config = { tools: [{ functionDeclarations: [{ name: 'get_weather', parametersJsonSchema: weather }] }] };
    const r = await gg.models.generateContent({ model, contents: ask, config });
    const fc = r.functionCalls?.[0];
    check(fc?.name === 'get_weather', 'no function call: ' + JSON.stringify(r));
    const r2 = await gg.models.generateContent({
      model, config,
      contents: [
        { role: 'user', parts: [{ text: ask }] },
        { role: 'model', parts: [{ functionCall: fc }] },
        { role: 'user', parts: [{ functionResponse: { id: fc.id, name: fc.name, response: { forecast: 'Sunny' } } }] },
      ],
    });
    check(r2.text.startsWith('Tool result received'), 'after the result: ' + JSON.stringify(r2));
  },
};

if (embedModel) {
  cases['openai/embeddings'] = async () => {
    // The SDK's default encoding_format is base64, which it decodes.
    const e = await oa.embeddings.create({ model: embedModel, input: ['one', 'two'] });
    check(e.data.length === 2 && e.data[0].embedding.length > 0 && typeof e.data[0].embedding[0] === 'number', 'embeddings: ' + JSON.stringify(e));
  };
  cases['genai/embed'] = async () => {
    const e = await gg.models.embedContent({ model: embedModel, contents: ['one', 'two'] });
    check(e.embeddings.length === 2 && e.embeddings[0].values.length > 0, 'embeddings: ' + JSON.stringify(e));
  };
}

const results = {};
for (const [name, fn] of Object.entries(cases)) {
  try {
    await fn();
    results[name] = 'ok';
  } catch (e) {
    results[name] = String(e?.stack ?? e).slice(0, 600);
  }
}
console.log(JSON.stringify(results));
