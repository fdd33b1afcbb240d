// llama.cpp's greedy tokens and logits for given token ids (through the npm
// package node-llama-cpp's prebuilt CPU build, tests/npm): the independent
// implementation tests/reference/xcheck.py compares nibble against.
//
// usage: node llama_eval.mjs MODEL.gguf --ids 1,2,3 [--gen N] [--logits-out FILE.f32]
//
// --gen: greedy continuation of --ids (temperature 0: the largest logit).
// --logits-out: the logits after each id of --ids followed by the generated
// tokens but the last (teacher forcing on one fresh sequence), as
// positions x vocab little-endian f32.
// The context keeps K and V in f32 and computes attention without flash
// attention, so that nothing rounds the cache to f16 (llama.cpp's default).
// Prints one JSON line: generated, vocab, positions; or {error, skip}.
// Exit 77 (skip) when node-llama-cpp or its CPU binary is missing.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.NIB_NPM_DIR || path.join(here, "..", "npm", "node_modules");

function arg(name, dflt) {
    const i = process.argv.indexOf(name);
    return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : dflt;
}
const file = process.argv[2];
const ids = (arg("--ids", "") || "").split(",").filter((s) => s !== "").map(Number);
const gen = Number(arg("--gen", "0"));
const logitsOut = arg("--logits-out", null);

function skip(why) {
    console.log(JSON.stringify({ skip: why }));
    process.exit(77);
}

process.env.NODE_LLAMA_CPP_SKIP_DOWNLOAD = "true";
const entry = path.join(npmDir, "node-llama-cpp", "dist", "index.js");
if (!fs.existsSync(entry))
    skip(`node-llama-cpp not found under ${npmDir} (NIB_NPM_DIR): run .ci/install-deps.sh`);
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

const logs = [];
let llama;
try {
    llama = await getLlama({
        gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
        progressLogs: false, logLevel: LlamaLogLevel.warn,
        logger: (level, msg) => logs.push(`${level}: ${msg.trim()}`),
    });
} catch (e) {
    skip(`node-llama-cpp has no prebuilt CPU binary for ${process.platform}-${process.arch}: ${e?.message ?? e}`);
}
try {
    if (!file || ids.length === 0) throw new Error("usage: llama_eval.mjs MODEL.gguf --ids 1,2,3 [--gen N] [--logits-out F]");
    const model = await llama.loadModel({ modelPath: file, gpuLayers: 0, useMmap: true });
    const n = ids.length + gen + 1;
    const context = await model.createContext({
        contextSize: Math.max(64, n), batchSize: Math.max(64, n), threads: 1,
        flashAttention: false, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const seq = context.getSequence();
    const generated = [];
    if (gen > 0) {
        for await (const tok of seq.evaluate(ids, { temperature: 0, yieldEogToken: true })) {
            generated.push(Number(tok));
            if (generated.length >= gen) break;
        }
    }
    let positions = 0, nVocab = 0;
    if (logitsOut) {
        await seq.clearHistory();
        const seqIds = [...ids, ...generated.slice(0, Math.max(0, generated.length - 1))];
        const res = await seq.controlledEvaluate(seqIds.map((t) => [t, { generateNext: { logits: true } }]));
        nVocab = res[0].next.logits.size;
        const buf = new Float32Array(seqIds.length * nVocab);
        res.forEach((r, p) => {
            for (const [tok, v] of r.next.logits) buf[p * nVocab + Number(tok)] = v;
        });
        fs.writeFileSync(logitsOut, Buffer.from(buf.buffer));
        positions = seqIds.length;
    }
    console.log(JSON.stringify({ model: file, generated, vocab: nVocab, positions }));
    await context.dispose(); await model.dispose(); await llama.dispose();
} catch (e) {
    console.log(JSON.stringify({ model: file, error: String(e?.message ?? e), llama_log: logs }));
    process.exitCode = 1;
}
