// What the vision scripts (onnx_xcheck, accuracy, ort_run, the onnxruntime
// benchmark) share: finding the pinned npm packages, and taking options.
import { existsSync } from 'node:fs';
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
