// The independent reference for tests/boot/chat_e2e.py: a conversation
// rendered with the model's own chat template by @huggingface/jinja and the
// text tokenized by @huggingface/tokenizers (add_special_tokens false, as
// transformers' apply_chat_template(tokenize=True) does: the template
// writes BOS itself where the model wants one).
//
//   node chat_reference.mjs NPM_DIR MODEL_DIR CASES.json
//
// CASES.json: [{"messages": [...], "now": SECONDS, "add_generation_prompt": bool}]
// Prints [{"text": ..., "ids": [...]}] (or {"error": ...} per case); exit 77
// when the packages are missing.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { pinClock, tokenText } from "../chat/pinned_clock.mjs";

const [npmDir, modelDir, casesPath] = process.argv.slice(2);
const jinjaEntry = path.join(npmDir, "@huggingface", "jinja", "dist", "index.js");
const tokEntry = path.join(npmDir, "@huggingface", "tokenizers", "dist", "tokenizers.mjs");
if (!fs.existsSync(jinjaEntry) || !fs.existsSync(tokEntry)) {
    console.log(`SKIP: @huggingface/jinja or @huggingface/tokenizers not under ${npmDir}`);
    process.exit(77);
}
const jinja = await import(pathToFileURL(jinjaEntry).href);
const { Tokenizer } = await import(pathToFileURL(tokEntry).href);

// The pinned clock: strftime_now() formats the case's time, in UTC.
const setNow = pinClock();

const json = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer.json"), "utf8"));
const config = JSON.parse(fs.readFileSync(path.join(modelDir, "tokenizer_config.json"), "utf8"));
const tok = new Tokenizer(json, config);
const template = new jinja.Template(config.chat_template);
const out = [];
for (const c of JSON.parse(fs.readFileSync(casesPath, "utf8"))) {
    setNow(c.now * 1000);
    try {
        const rendered = template.render({
            messages: c.messages,
            add_generation_prompt: c.add_generation_prompt,
            bos_token: tokenText(config.bos_token),
            eos_token: tokenText(config.eos_token),
        });
        out.push({ text: rendered, ids: tok.encode(rendered, { add_special_tokens: false }).ids });
    } catch (e) {
        out.push({ error: String(e.message || e) });
    }
}
process.stdout.write(JSON.stringify(out) + "\n");
