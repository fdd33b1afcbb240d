// What the vision scripts (onnx_xcheck, accuracy, ort_run, the onnxruntime
// benchmark) share: finding the pinned npm packages, and taking options.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

// The node_modules folder that holds every path in `needs` (package names,
// or paths inside packages): $NIB_NPM_DIR (or its node_modules), else
// tests/npm/node_modules as .ci/install-deps.sh installs it. Without one,
// exit 77 (meson's skip) saying where it looked.
export function npmModules(needs) {
  const env = process.env.NIB_NPM_DIR;
  const candidates = [env, env && path.join(env, 'node_modules'),
    path.join(here, '..', 'npm', 'node_modules')].filter(Boolean);
  const modules = candidates.find((d) => needs.every((p) => existsSync(path.join(d, p))));
  if (!modules) {
    console.log('SKIP: ' + needs.join(' or ') + ' not installed (looked in ' +
      candidates.join(', ') + '); run .ci/install-deps.sh');
    process.exit(77);
  }
  return modules;
}

// opt(name, default): the value after `name` in argv, removed from it.
export function optTaker(argv) {
  return (name, dflt) => {
    const i = argv.indexOf(name);
    if (i < 0) return dflt;
    const v = argv[i + 1];
    argv.splice(i, 2);
    return v;
  };
}

// onnxruntime-node from `modules` (npmModules), or exit 77 saying why it
// does not load on this machine.
export function loadOrt(modules) {
  try {
    return createRequire(path.join(modules, 'x.js'))('onnxruntime-node');
  } catch (e) {
    console.log('SKIP: onnxruntime-node does not load on this machine: ' + e.message);
    process.exit(77);
  }
}

// An image-like NCHW input: smooth bands plus noise from a fixed LCG, in
// [-1, 1] as PaddleOCR's normalisation gives; the same for the same seed.
export function imageLikeInput(dims, seed) {
  const n = dims.reduce((a, b) => a * b, 1), x = new Float32Array(n);
  const [, c, h, w] = dims;
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    const ww = i % w, hh = Math.floor(i / w) % h, cc = Math.floor(i / (w * h)) % c;
    const v = 0.6 * Math.sin(ww * 0.11 + cc) * Math.cos(hh * 0.17) + 0.4 * (s / 2 ** 32 * 2 - 1);
    x[i] = Math.max(-1, Math.min(1, v));
  }
  return x;
}
