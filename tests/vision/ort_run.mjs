// One run of an .onnx model in onnxruntime-node (f32, CPU, one thread): the
// reference the end-to-end test (test_vision_e2e.py) compares against.
// Reads one float32 .npy input, writes output K (the model's output order)
// as OUTDIR/K.npy. Exit 77, saying why, when onnxruntime-node is missing.
//
// usage: node ort_run.mjs MODEL.onnx INPUT_NAME INPUT.npy OUTDIR
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { loadOrt, npmModules } from './script_util.mjs';

const [model, name, input, outdir] = process.argv.slice(2);
if (!outdir) {
  console.error('usage: node ort_run.mjs MODEL.onnx INPUT_NAME INPUT.npy OUTDIR');
  process.exit(2);
}
const modules = npmModules(['onnxruntime-node/package.json']);
const ort = loadOrt(modules);

const b = readFileSync(input), hl = b.readUInt16LE(8), h = b.subarray(10, 10 + hl).toString('latin1');
const dims = h.match(/'shape': \(([^)]*)\)/)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
const x = new Float32Array(b.buffer.slice(b.byteOffset + 10 + hl, b.byteOffset + b.length));
const sess = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
const res = await sess.run({ [name]: new ort.Tensor('float32', x, dims) });
sess.outputNames.forEach((o, k) => {
  const t = res[o];
  let hd = `{'descr': '<f4', 'fortran_order': False, 'shape': (${t.dims.join(', ')}${t.dims.length === 1 ? ',' : ''}), }`;
  while ((10 + hd.length + 1) % 64) hd += ' ';
  hd += '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, hd.length & 255, hd.length >> 8]);
  const d = t.data;
  writeFileSync(path.join(outdir, `${k}.npy`),
    Buffer.concat([pre, Buffer.from(hd, 'latin1'), Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
});
