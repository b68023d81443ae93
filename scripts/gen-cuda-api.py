#!/usr/bin/env python3
"""Generates C tables for a library that implements (part of) the CUDA driver API.

Inputs, all from the installed CUDA toolkit plus one list of ours:
  * cudaTypedefs.h: every PFN_<base>_v<version>[_ptds|_ptsz] typedef, i.e. every
    (base name, ABI version, per-thread flavour) that cuGetProcAddress can be
    asked for;
  * the link stub lib64/stubs/libcuda.so: the exact names the real driver
    exports (the authority for which _vN symbol a version maps to);
  * a .def file of X(symbol) lines: the symbols our library implements (a
    hook list may also hold G(symbol) lines: wrappers generated here);
  * for an interposer's NVML hooks, a header declaring their prototypes
    (include/cuslice/nvml-abi.h), which type their fallbacks;
  * for cusim, the graphics-interop typedef headers (cudaGLTypedefs.h,
    cudaEGLTypedefs.h, cudaVDPAUTypedefs.h) and a second .def of the interop
    symbols: the real libcuda.so.1 exports them, the link stub does not, so
    that list is their authority (each must still fit its PFN typedefs).
    A base name none of whose variants is exported (cuWGLGetDevice: Windows)
    is left out of the table.

The k-th ABI version of a base name (in increasing order) is the k-th exported
variant (base, base_v2, base_v3, ...); a _ptds/_ptsz PFN at version V is the
symbol for V plus that suffix. This holds for every name of CUDA 13.0 and the
generator fails the build if a future toolkit breaks it.

Outputs (one per sub-command):
  procs   C file: sorted table {base, version, flavour, symbol, pointer} used
          by cuGetProcAddress; pointer is NULL for variants not implemented.
  map     linker version script exporting exactly the implemented symbols.
  errors  C header: X(name, value, "description") for every CUresult.
  hooks   for an interposer (libcuslice): a header with one CS_HOOK_<symbol> id
          per wrapped symbol (driver ids first, then NVML), and a C file with
          the wrappers by id and by name and the driver's (name, version,
          flavour) -> wrapper table that cuGetProcAddress wrapping consults;
          a C file defining the G(symbol) wrappers (launch gate, then the
          driver), each typed by the PFN typedef its symbol maps to; and a C
          file of typed fallbacks, one per hook with the hooked function's
          exact prototype (the driver's from its PFN typedef, NVML's from
          nvml-abi.h), returning CUDA_ERROR_NOT_SUPPORTED or
          NVML_ERROR_FUNCTION_NOT_FOUND, and cs_hook_missing[id], the table
          of them that stands in for a function the real library lacks.
"""
import argparse
import os
import re
import subprocess
import sys

# The forms of a hook list's lines: X(symbol) a hand-written wrapper,
# G(symbol) one that only passes the launch gate, generated here.
HOOK_FORMS = ("X", "G")

FLAVOURS = {"": "CS_PROCADDR_LEGACY", "_ptds": "CS_PROCADDR_PTDS", "_ptsz": "CS_PROCADDR_PTSZ"}


def read_def_policies(path, forms=("X",)):
    """[(symbol, form)] of a .def's lines; form is the macro letter (X, or G where allowed)."""
    rows = []
    for lineno, line in enumerate(open(path), 1):
        line = line.strip()
        if not line or line.startswith(("/*", "*", "//", "#")):
            continue
        m = re.fullmatch(r"([A-Z])\((\w+)\)", line)
        if not m or m.group(1) not in forms:
            want = " or ".join(f"{f}(symbol)" for f in forms)
            sys.exit(f"{path}:{lineno}: expected {want}, got: {line}")
        rows.append((m.group(2), m.group(1)))
    syms = [s for s, _ in rows]
    if len(set(syms)) != len(syms):
        dup = sorted({s for s in syms if syms.count(s) > 1})
        sys.exit(f"{path}: duplicate symbols: {', '.join(dup)}")
    return rows


def read_def(path, forms=("X",)):
    return [s for s, _ in read_def_policies(path, forms)]


def stub_exports(stub):
    out = subprocess.run(["nm", "-D", "--defined-only", stub], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def variants(base, exports):
    vs = [s for s in exports if s == base or re.fullmatch(re.escape(base) + r"_v\d+", s)]
    return sorted(vs, key=lambda s: 0 if s == base else int(s.rsplit("_v", 1)[1]))


def proc_table(typedefs, exports, optional=False):
    """Returns [(base, version, flavour_suffix, symbol)] sorted by (base, version, flavour).

    optional: a base name with no exported variant at all is skipped, not an error.
    """
    text = open(typedefs).read()
    pfns = {}
    for m in re.finditer(r"PFN_(cu\w+?)_v(\d+)(_ptds|_ptsz)?\)", text):
        pfns.setdefault(m.group(1), set()).add((int(m.group(2)), m.group(3) or ""))
    rows = []
    for base, vers in pfns.items():
        plain = sorted(v for v, s in vers if not s)
        syms = variants(base, exports)
        if optional and not syms:
            continue
        if len(plain) != len(syms):
            sys.exit(f"{base}: {len(plain)} ABI versions {plain} but exported {syms}")
        for v, suffix in vers:
            idx = max(i for i, pv in enumerate(plain) if pv <= v)
            sym = syms[idx] + suffix
            if sym not in exports:
                sys.exit(f"{base} v{v}{suffix}: {sym} is not exported by the driver")
            rows.append((base, v, suffix, sym))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    return rows


def driver_defs(path, exports, forms=("X",)):
    """The symbols of a .def that must all be real driver exports."""
    syms = read_def(path, forms)
    unknown = [s for s in syms if s not in exports]
    if unknown:
        sys.exit(f"{path}: not exported by the real driver: {', '.join(unknown)}")
    return syms


def proc_rows_c(prefix, typedefs, exports, provided, extra_typedefs=()):
    """C lines of the (name, version, flavour) -> symbol table; fn NULL unless provided."""
    rows = proc_table(typedefs, exports)
    for t in extra_typedefs:
        rows += proc_table(t, exports, optional=True)
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    out = [f"const struct cs_procaddr_row {prefix}_procaddr_rows[] = {{"]
    for base, v, suffix, sym in rows:
        ptr = f"(cs_procaddr_fn){sym}" if sym in provided else "NULL"
        out.append(f'\t{{"{base}", {v}, {FLAVOURS[suffix]}, "{sym}", {ptr}}},')
    out.append("};")
    out.append(f"const size_t {prefix}_procaddr_nrows = sizeof({prefix}_procaddr_rows) / "
               f"sizeof({prefix}_procaddr_rows[0]);")
    return out


def gen_procs(args):
    exports = stub_exports(args.stub)
    impl = set(driver_defs(args.defs, exports))
    if args.interop_defs:
        interop = read_def(args.interop_defs)
        clash = sorted(set(interop) & (exports | impl))
        if clash:
            sys.exit(f"{args.interop_defs}: in the link stub or the main list: {', '.join(clash)}")
        exports |= set(interop)
        impl |= set(interop)
    out = [f"/* Generated by scripts/gen-cuda-api.py from {args.defs}; do not edit. */",
           f'#include "{args.header}"']
    if args.interop_header:
        out.append(f'#include "{args.interop_header}"')
    out.append("")
    out += proc_rows_c(args.prefix, args.typedefs, exports, impl, args.interop_typedefs)
    out.append("")
    # The implemented symbols by name, sorted, for dlsym-style lookups.
    out.append(f"const struct cs_sym {args.prefix}_syms[] = {{")
    for sym in sorted(impl):
        out.append(f'\t{{"{sym}", (cs_procaddr_fn){sym}}},')
    out.append("};")
    out.append(f"const size_t {args.prefix}_nsyms = sizeof({args.prefix}_syms) / "
               f"sizeof({args.prefix}_syms[0]);")
    open(args.output, "w").write("\n".join(out) + "\n")


def gen_hooks(args):
    exports = stub_exports(args.stub)
    cuda = driver_defs(args.cuda_defs, exports, HOOK_FORMS)
    nvml = read_def(args.nvml_defs)
    bad = [s for s in nvml if not s.startswith("nvml")]
    if bad:
        sys.exit(f"{args.nvml_defs}: not NVML names: {', '.join(bad)}")
    ids = sorted(cuda) + sorted(nvml)
    index = {s: i for i, s in enumerate(ids)}
    gen = f"/* Generated by scripts/gen-cuda-api.py from {args.cuda_defs} and {args.nvml_defs}; do not edit. */"
    h = [gen, "#ifndef CS_HOOKS_GEN_H", "#define CS_HOOKS_GEN_H", "", "enum cs_hook_id {"]
    h += [f"\tCS_HOOK_{s} = {i}," for s, i in index.items()]
    h += [f"\tCS_HOOK_FIRST_NVML = {len(cuda)},", f"\tCS_HOOK_COUNT = {len(ids)},", "};", "",
          "#endif", ""]
    open(args.output_h, "w").write("\n".join(h))
    out = [gen, f'#include "{args.header}"', ""]
    out.append("const char *const cs_hook_names[CS_HOOK_COUNT] = {")
    out += [f'\t"{s}",' for s in ids]
    out.append("};")
    out.append("")
    out.append("const cs_hook_fn cs_hook_wrappers[CS_HOOK_COUNT] = {")
    out += [f"\t(cs_hook_fn){s}," for s in ids]
    out.append("};")
    out.append("")
    out.append("/* Wrapped symbols by name, for dlsym. */")
    out.append("const struct cs_hook_name cs_hooks_by_name[CS_HOOK_COUNT] = {")
    out += [f'\t{{"{s}", CS_HOOK_{s}}},' for s in sorted(ids)]
    out.append("};")
    out.append("")
    out.append("/* Every driver ABI variant; fn is the wrapper, NULL where not wrapped. */")
    out += proc_rows_c("cs", args.typedefs, exports, index)
    open(args.output_c, "w").write("\n".join(out) + "\n")
    gated = [s for s, form in read_def_policies(args.cuda_defs, HOOK_FORMS) if form == "G"]
    w = [f"/* Generated by scripts/gen-cuda-api.py from {args.cuda_defs}: its G(symbol) lines,",
         " * typed by cudaTypedefs.h; do not edit. Each passes the launch gate and",
         " * calls the driver with its arguments untouched. */",
         f'#include "{args.header}"']
    w += gated_wrappers_c(gated, args.typedefs, exports)
    open(args.output_gated, "w").write("\n".join(w) + "\n")
    m = [f"/* Generated by scripts/gen-cuda-api.py from {args.cuda_defs} and {args.nvml_defs},",
         f" * typed by cudaTypedefs.h and {os.path.normpath(args.nvml_abi)}; do not edit.",
         " * A hook's fallback answers in the real library's place when the installed",
         " * library lacks the function (STYLE.md: never call a missing function);",
         " * declaring it first with the hooked function's type makes the compiler",
         " * check that its prototype is exactly that one. It ignores its arguments. */",
         f'#include "{args.header}"', "",
         '#pragma GCC diagnostic ignored "-Wunused-parameter"']
    m += missing_fallbacks_c(ids, sorted(cuda), driver_prototypes(sorted(cuda), args.typedefs, exports),
                             nvml_prototypes(args.nvml_abi))
    open(args.output_missing, "w").write("\n".join(m) + "\n")


def pfn_prototypes(typedefs):
    """{PFN name: (return type, parameter list text)} of a typedef header."""
    text = open(typedefs).read()
    protos = {}
    for m in re.finditer(r"typedef\s+(\w+)\s*\(\s*CUDAAPI\s*\*\s*(PFN_\w+)\s*\)\s*\((.*?)\)\s*;",
                         text, re.S):
        protos[m.group(2)] = (m.group(1), " ".join(m.group(3).split()))
    return protos


C_TYPE_WORDS = {"void", "char", "short", "int", "long", "float", "double", "signed", "unsigned",
                "_Bool", "bool", "const", "volatile", "restrict", "struct", "union", "enum"}


def split_params(params):
    """A C parameter list's parameters, split at the commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in params:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def param_name(p):
    """The name a C parameter declares, or None when it has none."""
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", p)  # a function pointer: (*name)(...)
    if m:
        return m.group(1)
    tokens = re.findall(r"\w+|\*", re.sub(r"(\[[^]]*\]\s*)+$", "", p))
    if not tokens or not re.fullmatch(r"\w+", tokens[-1]) or tokens[-1] in C_TYPE_WORDS:
        return None
    # A name follows a type: more than qualifiers, and not a bare struct/union/enum keyword.
    if all(t in ("const", "volatile", "restrict") for t in tokens[:-1]):
        return None
    return None if tokens[-2] in ("struct", "union", "enum") else tokens[-1]


def named_params(params):
    """(parameter list, names) with a name aN given to each unnamed parameter ("void": none)."""
    if params.strip() == "void":
        return "void", []
    decls, names = [], []
    for i, p in enumerate(split_params(params)):
        name = param_name(p)
        if name is None:
            if "(" in p:
                sys.exit(f"cannot name the function-pointer parameter '{p}'")
            name = f"a{i}"
            arr = re.search(r"(\s*\[[^]]*\])+$", p)
            p = f"{p[:arr.start()]} {name}{arr.group(0)}" if arr else f"{p} {name}"
        decls.append(p)
        names.append(name)
    return ", ".join(decls), names


def driver_prototypes(syms, typedefs, exports):
    """{symbol: (PFN name, return type, parameter list)}: each symbol's PFN typedef.

    A symbol's PFN is the one cuGetProcAddress maps to it (proc_table): every
    version that maps to one symbol shares its prototype, the lowest is taken.
    """
    pfn_of = {}
    for base, v, suffix, sym in proc_table(typedefs, exports):
        pfn_of.setdefault(sym, f"PFN_{base}_v{v}{suffix}")
    protos = pfn_prototypes(typedefs)
    out = {}
    for sym in syms:
        pfn = pfn_of.get(sym)
        if pfn is None or pfn not in protos:
            sys.exit(f"{sym}: no PFN typedef in {typedefs} to type its wrapper")
        ret, params = protos[pfn]
        if ret != "CUresult":
            sys.exit(f"{sym}: {pfn} returns {ret}, not CUresult")
        out[sym] = (pfn, ret, params)
    return out


def nvml_prototypes(header):
    """{symbol: (return type, parameter list)} of the NVML functions a header declares."""
    text = re.sub(r"/\*.*?\*/", " ", open(header).read(), flags=re.S)
    return {m.group(2): (m.group(1), " ".join(m.group(3).split()))
            for m in re.finditer(r"^(nvmlReturn_t)\s+(nvml\w+)\s*\(([^;]*?)\)\s*;", text, re.M)}


def gated_wrappers_c(gated, typedefs, exports):
    """C definitions of the gate-only wrappers, each from its symbol's PFN typedef."""
    out = []
    for sym, (pfn, ret, params) in sorted(driver_prototypes(gated, typedefs, exports).items()):
        params, names = named_params(params)
        out += ["", f"/* {pfn} */", f"CS_EXPORT CUresult {sym}({params})", "{",
                "\tCUresult r;", "",
                "\tcs_launch_gate();", f"\tr = CS_REAL({sym})({', '.join(names)});",
                "\tcs_launch_done();", "\treturn r;", "}"]
    return out


def missing_fallbacks_c(ids, cuda, driver, nvml):
    """The typed fallbacks of every hook (ids order: driver, then NVML) and their table."""
    out = []
    for sym in ids:
        if sym in cuda:
            ret, params, answer = driver[sym][1], driver[sym][2], "CUDA_ERROR_NOT_SUPPORTED"
        elif sym in nvml:
            (ret, params), answer = nvml[sym], "NVML_ERROR_FUNCTION_NOT_FOUND"
        else:
            sys.exit(f"{sym}: no prototype in the NVML header to type its fallback")
        params, _ = named_params(params)
        out += ["", f"static __typeof__({sym}) missing_{sym};",
                f"static {ret} missing_{sym}({params})", "{", f"\treturn {answer};", "}"]
    out += ["", "const cs_hook_fn cs_hook_missing[CS_HOOK_COUNT] = {"]
    out += [f"\t(cs_hook_fn)missing_{s}," for s in ids]
    out.append("};")
    return out


def gen_map(args):
    syms = []
    for d in args.defs_list:
        syms += read_def(d, HOOK_FORMS)
    body = "".join(f"\t\t{s};\n" for s in sorted(set(syms)))
    open(args.output, "w").write("{\n\tglobal:\n" + body + "\tlocal:\n\t\t*;\n};\n")


def gen_errors(args):
    text = open(args.cuda_h).read()
    m = re.search(r"typedef enum cudaError_enum \{(.*?)\} CUresult;", text, re.S)
    if not m:
        sys.exit("cudaError_enum not found in cuda.h")
    body = m.group(1)
    out = ["/* Generated by scripts/gen-cuda-api.py from cuda.h; do not edit. */"]
    for em in re.finditer(r"/\*\*(.*?)\*/\s*(CUDA_\w+)\s*=\s*(\d+)", body, re.S):
        doc = " ".join(l.strip(" *") for l in em.group(1).splitlines()).strip()
        doc = re.sub(r"\\ref\s+|::|\\p\s+", "", doc)
        doc = re.sub(r"\\deprecated\s*", "Deprecated: ", doc)
        doc = re.split(r"(?<=[a-z0-9)])\.\s", doc + " ")[0].rstrip(". ")
        doc = doc.replace("\\", "\\\\").replace('"', '\\"')
        out.append(f'X({em.group(2)}, {em.group(3)}, "{doc}")')
    open(args.output, "w").write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("procs")
    p.add_argument("--typedefs", required=True)
    p.add_argument("--stub", required=True)
    p.add_argument("--defs", required=True)
    p.add_argument("--header", required=True, help="header declaring struct cs_procaddr_row")
    p.add_argument("--prefix", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--interop-defs", help=".def of exported interop symbols the stub lacks")
    p.add_argument("--interop-header", help="header declaring the interop symbols")
    p.add_argument("--interop-typedefs", action="append", default=[],
                   help="an interop PFN typedef header (repeatable)")
    p.set_defaults(fn=gen_procs)
    p = sub.add_parser("hooks")
    p.add_argument("--typedefs", required=True)
    p.add_argument("--stub", required=True)
    p.add_argument("--cuda-defs", required=True)
    p.add_argument("--nvml-defs", required=True)
    p.add_argument("--header", required=True, help="header declaring the table types")
    p.add_argument("--output-c", required=True)
    p.add_argument("--output-h", required=True)
    p.add_argument("--nvml-abi", required=True, help="header of the NVML prototypes (nvml-abi.h)")
    p.add_argument("--output-gated", required=True, help="C file of the G(symbol) wrappers")
    p.add_argument("--output-missing", required=True, help="C file of the typed fallbacks")
    p.set_defaults(fn=gen_hooks)
    p = sub.add_parser("map")
    p.add_argument("--output", required=True)
    p.add_argument("defs_list", nargs="+")
    p.set_defaults(fn=gen_map)
    p = sub.add_parser("errors")
    p.add_argument("--cuda-h", required=True)
    p.add_argument("--output", required=True)
    p.set_defaults(fn=gen_errors)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
