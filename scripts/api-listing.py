#!/usr/bin/env python3
"""Lists the public API of the `cascadekv` crate, one item per line, from rustdoc's
JSON output: every item reachable from the crate root (doc(hidden) items are not),
its public fields, enum variants, inherent methods and trait implementations.

    scripts/api-listing.py            # prints the listing
    scripts/api-listing.py --check    # compares it with docs/api.md; exit 1 if they differ

rustdoc's JSON output is unstable, so it is requested with RUSTC_BOOTSTRAP=1 on the
stable toolchain; the fields read here (index, root, inner.{module,use,struct,enum,
impl,function,type_alias,trait,constant}) have been stable for years. scripts/test.sh
runs the check, so the surface cannot grow (or shrink) without docs/api.md saying so.
"""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def build_json():
    env = dict(os.environ, RUSTC_BOOTSTRAP="1")
    subprocess.run(
        ["cargo", "rustdoc", "-q", "-p", "cascadekv", "--lib", "--",
         "-Z", "unstable-options", "--output-format", "json", "-A", "warnings"],
        cwd=ROOT, env=env, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    with open(os.path.join(target, "doc", "cascadekv.json")) as f:
        return json.load(f)


def type_name(t):
    """A short name for a type in an impl header."""
    if not isinstance(t, dict):
        return str(t)
    if "resolved_path" in t:
        return t["resolved_path"]["path"].split("::")[-1]
    if "primitive" in t:
        return t["primitive"]
    if "borrowed_ref" in t:
        return "&" + type_name(t["borrowed_ref"]["type"])
    return next(iter(t))


def listing(doc):
    idx = doc["index"]
    out = set()

    def item(i):
        return idx.get(str(i))

    def public(it):
        return it is not None and it.get("visibility") == "public"

    def walk(it, path):
        inner = it["inner"]
        kind = next(iter(inner))
        body = inner[kind]
        if kind == "module":
            out.add(f"mod {path}")
            for c in body["items"]:
                ci = item(c)
                if ci is None:
                    continue
                if "use" in ci["inner"]:
                    u = ci["inner"]["use"]
                    target = item(u["id"]) if u.get("id") is not None else None
                    if target is not None:
                        walk(target, f"{path}::{u['name']}")
                    else:
                        out.add(f"use {path}::{u['name']} (external)")
                elif public(ci):
                    walk(ci, f"{path}::{ci['name']}")
        elif kind in ("struct", "enum", "union"):
            out.add(f"{kind} {path}")
            if kind == "struct":
                fields = body["kind"].get("plain", {}).get("fields", []) if isinstance(body["kind"], dict) else []
                for f in fields:
                    fi = item(f)
                    if public(fi):
                        out.add(f"field {path}::{fi['name']}")
            if kind == "enum":
                for v in body["variants"]:
                    vi = item(v)
                    if vi is not None:
                        out.add(f"variant {path}::{vi['name']}")
            for im in body["impls"]:
                ii = item(im)
                if ii is None:
                    continue
                imp = ii["inner"]["impl"]
                if imp.get("is_synthetic") or imp.get("blanket_impl") is not None:
                    continue
                if imp.get("trait") is None:
                    for m in imp["items"]:
                        mi = item(m)
                        if public(mi):
                            mk = next(iter(mi["inner"]))
                            word = {"function": "fn", "assoc_const": "const"}.get(mk, mk)
                            out.add(f"{word} {path}::{mi['name']}")
                else:
                    tr = imp["trait"]["path"].split("::")[-1]
                    out.add(f"impl {tr} for {path.split('::')[-1]}")
        elif kind == "function":
            out.add(f"fn {path}")
        elif kind == "type_alias":
            out.add(f"type {path}")
        elif kind == "trait":
            out.add(f"trait {path}")
        elif kind in ("constant", "static"):
            out.add(f"{'const' if kind == 'constant' else 'static'} {path}")
        else:
            out.add(f"{kind} {path}")

    walk(item(doc["root"]), "cascadekv")
    return sorted(out)


def main():
    lines = listing(build_json())
    text = "\n".join(lines) + "\n"
    if "--check" not in sys.argv:
        sys.stdout.write(text)
        return 0
    with open(os.path.join(ROOT, "docs", "api.md")) as f:
        doc = f.read()
    start = doc.index("```text\n") + len("```text\n")
    end = doc.index("```", start)
    if doc[start:end] == text:
        print(f"public API: {len(lines)} items, as docs/api.md lists them")
        return 0
    want = set(doc[start:end].splitlines())
    got = set(lines)
    for l in sorted(got - want):
        print(f"+ {l}  (public now, not in docs/api.md)")
    for l in sorted(want - got):
        print(f"- {l}  (in docs/api.md, not public now)")
    print("the public API differs from docs/api.md: update the listing there "
          "(scripts/api-listing.py prints it) if the change is intended")
    return 1


if __name__ == "__main__":
    sys.exit(main())
