#!/usr/bin/env python3
"""Every #include "..." in the tree against the module ranks (docs/architecture.md).

Ranks, lowest first; a file may include only files of its own rank or lower:
  kernels/     nothing of the project outside kernels/
  model_blob/  kernels/
  proto/       nothing of the project (libc only)
  rt/          kernels/, model_blob/, proto/
  boot/        everything above
  tools/, tests/ anything below them; inside tools/:
               util < compiler < host < measure < cli

Also fails on any include cycle between modules, a module being a .c file
and its .h (rt/exec.c and rt/exec.h are one). Prints each offending file and
include. Usage: include_ranks.py [SOURCE_ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', '..'))
SKIP_DIRS = {'.git', 'subprojects', '.deps', 'node_modules'}  # node_modules: npm packages (tests/npm)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# (rank, rank inside tools/): the second number only orders tools/ folders.
TOP = {'kernels': 0, 'model_blob': 1, 'proto': 2, 'rt': 3, 'boot': 4, 'linker': 4,
       'tools': 5, 'tests': 5}
TOOLS = {'util': 0, 'compiler': 1, 'host': 2, 'measure': 3, 'cli': 4}
# proto/ is a leaf: below rt/ but it may include nothing of kernels/ or model_blob/.
ALLOWED = {
    'kernels': {'kernels'},
    'model_blob': {'kernels', 'model_blob'},
    'proto': {'proto'},
    'rt': {'kernels', 'model_blob', 'proto', 'rt'},
}


def rank(path):
    parts = path.split('/')
    top = parts[0]
    if top not in TOP:
        return None
    sub = 0
    if top == 'tools':
        sub = TOOLS.get(parts[1], len(TOOLS)) if len(parts) > 2 else len(TOOLS)
    elif top == 'tests':
        sub = len(TOOLS) + 1  # tests may include any of tools/, tools/ none of tests/
    return TOP[top], sub


def may_include(src, dst):
    a, b = src.split('/')[0], dst.split('/')[0]
    if a in ALLOWED:
        return b in ALLOWED[a]
    ra, rb = rank(src), rank(dst)
    if ra is None or rb is None:
        return True
    if rb[0] != ra[0]:
        return rb[0] < ra[0]
    return rb[1] <= ra[1]


def sources():
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = sorted(x for x in dirs if x not in SKIP_DIRS and not x.startswith('build'))
        for f in sorted(files):
            if f.endswith(('.c', '.h', '.S')):
                yield os.path.relpath(os.path.join(d, f), ROOT).replace(os.sep, '/')


def resolve(src, inc):
    """The included file as a path from the root, or None (generated, system)."""
    for base in (os.path.dirname(src), ''):
        p = os.path.normpath(os.path.join(base, inc)).replace(os.sep, '/')
        if not p.startswith('..') and os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def unit(path):
    return os.path.splitext(path)[0]


def main():
    bad = []
    graph = {}  # unit -> {unit: (file, include) that makes the edge}
    files = list(sources())
    for src in files:
        with open(os.path.join(ROOT, src), encoding='utf-8', errors='replace') as f:
            text = f.read()
        for inc in INCLUDE.findall(text):
            dst = resolve(src, inc)
            if dst is None:
                continue
            if not may_include(src, dst):
                bad.append('%s: #include "%s": %s/ may not include %s/ (ranks: the top of %s)'
                           % (src, inc, os.path.dirname(src), os.path.dirname(dst),
                              os.path.basename(__file__)))
            if unit(dst) != unit(src):
                graph.setdefault(unit(src), {}).setdefault(unit(dst), (src, inc))

    # Cycles: strongly connected components of more than one module (Tarjan).
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(graph.get(v, {}))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    for comp in comps:
        members = set(comp)
        edges = ['  %s: #include "%s"' % graph[a][b]
                 for a in comp for b in sorted(graph.get(a, {})) if b in members]
        bad.append('include cycle between %s:\n%s' % (', '.join(comp), '\n'.join(edges)))

    for line in bad:
        print(line)
    print('%d files checked: %s' % (len(files), 'ok' if not bad else '%d violation(s)' % len(bad)))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
