// Greedy-decode a GGUF with llama.cpp (via node-llama-cpp's prebuilt CPU binary,
// installed in tests/npm by .ci/install-deps.sh; NIB_NPM_DIR overrides).
// usage: NODE_LLAMA_CPP_SKIP_DOWNLOAD=true node llama_greedy.mjs MODEL.gguf [PROMPT] [N]
// Prints one JSON line: prompt_token_ids (BOS + SentencePiece, as llama.cpp
// tokenizes), generated_token_ids (temperature 0), text; or {error} on failure.
// (llama_eval.mjs is the token-id version the meson tests use.)
import path from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";

const npmDir = process.env.NIB_NPM_DIR ||
    path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "npm", "node_modules");
const {getLlama, LlamaLogLevel} =
    await import(pathToFileURL(path.join(npmDir, "node-llama-cpp", "dist", "index.js")).href);

const [file, prompt = "Once upon a time", nArg = "32"] = process.argv.slice(2);
const n = Number(nArg);
const logs = [];
try {
    const llama = await getLlama({
        gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
        progressLogs: false, logLevel: LlamaLogLevel.warn,
        logger: (level, msg) => logs.push(`${level}: ${msg.trim()}`),
    });
    const model = await llama.loadModel({modelPath: file, gpuLayers: 0});
    const context = await model.createContext({contextSize: 256, batchSize: 256, threads: 1});
    const seq = context.getSequence();
    const bos = model.tokens.bos;
    const promptIds = [...(bos != null ? [bos] : []), ...model.tokenize(prompt)];
    const gen = [];
    for await (const tok of seq.evaluate(promptIds, {temperature: 0})) {
        gen.push(tok);
        if (gen.length >= n || tok === model.tokens.eos) break;
    }
    console.log(JSON.stringify({
        model: file, prompt_token_ids: promptIds.map(Number),
        generated_token_ids: gen.map(Number), text: model.detokenize(gen),
    }));
    await context.dispose(); await model.dispose(); await llama.dispose();
} catch (e) {
    console.log(JSON.stringify({model: file, error: String(e?.message ?? e), llama_log: logs}));
    process.exitCode = 1;
}
