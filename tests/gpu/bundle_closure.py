#!/usr/bin/env python3
"""The GPU check bundle's dependency closure (tests/gpu/README.md): every ELF file's DT_NEEDED
libraries must be glibc/libstdc++/libgcc, the CUDA libraries of NVIDIA's Python wheels (or the
driver's libcuda), or a library the bundle carries. Reads ELF headers itself (no readelf, no
ldd): the GPU machine has neither binutils nor the build's libraries.

  bundle_closure.py BUNDLE_DIR                 check; one JSON object on stdout; exit 0 if closed
  bundle_closure.py BUNDLE_DIR --search DIRS   also say where each CUDA library resolves among
                                               DIRS (colon-separated, in order); exit 1 if one
                                               does not
"""
import json
import os
import struct
import sys

# The C and C++ runtime every Linux machine has (glibc, libgcc, libstdc++).
SYSTEM = {
    "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
    "ld-linux-x86-64.so.2", "libgcc_s.so.1", "libstdc++.so.6",
}
# What NVIDIA's wheels (nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13)
# ship, and the driver's own library.
CUDA = {
    "libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9",
    "libnccl.so.2", "libcuda.so.1",
}
DRIVER = {"libcuda.so.1"}  # comes with the driver, never from a wheel

SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _cstr(data, off):
    end = data.index(b"\0", off)
    return data[off:end].decode("utf-8", "replace")


def read_elf(path):
    """(soname, needed, runpath, versions) of a 64-bit little-endian ELF file; versions maps each
    needed library to the symbol versions it asks of it (GLIBC_2.34, GLIBCXX_3.4.30, ...)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(shnum):
        (_, sh_type, _, _, sh_offset, sh_size, sh_link, sh_info, _, _) = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info))
    soname, needed, runpath, versions = None, [], [], {}
    for sh_type, off, size, link, info in sections:
        if sh_type == SHT_DYNAMIC:
            strtab = sections[link][1]
            for k in range(size // 16):
                tag, val = struct.unpack_from("<qQ", data, off + 16 * k)
                if tag == 0:
                    break
                if tag == DT_NEEDED:
                    needed.append(_cstr(data, strtab + val))
                elif tag == DT_SONAME:
                    soname = _cstr(data, strtab + val)
                elif tag in (DT_RPATH, DT_RUNPATH):
                    runpath += _cstr(data, strtab + val).split(":")
        elif sh_type == SHT_GNU_VERNEED:
            strtab = sections[link][1]
            p = off
            for _ in range(info):
                _, cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, p)
                lib = _cstr(data, strtab + vn_file)
                a = p + vn_aux
                for _ in range(cnt):
                    _, _, _, name, nxt = struct.unpack_from("<IHHII", data, a)
                    versions.setdefault(lib, set()).add(_cstr(data, strtab + name))
                    a += nxt
                p += vn_next
    return soname, needed, runpath, versions


def _version_key(v):
    """GLIBC_2.34 -> ("GLIBC", (2, 34)), for the highest version asked of each family."""
    fam, _, num = v.partition("_")
    try:
        return fam, tuple(int(x) for x in num.split("."))
    except ValueError:
        return fam, ()


def check(bundle, search=None):
    elves = []
    for root, _, files in os.walk(bundle):
        for name in sorted(files):
            p = os.path.join(root, name)
            if not os.path.islink(p) and is_elf(p):
                elves.append(p)
    provided = {}  # soname or file name -> path in the bundle
    info = {}
    errors = []
    for p in elves:
        try:
            info[p] = read_elf(p)
        except (ValueError, struct.error, IndexError) as e:
            errors.append(f"{os.path.relpath(p, bundle)}: cannot read its ELF headers ({e})")
            continue
        soname = info[p][0]
        provided[os.path.basename(p)] = p
        if soname:
            provided[soname] = p
    violations, cuda_used, highest = [], {}, {}
    outside_runpath = []
    for p, (_, needed, runpath, versions) in sorted(info.items()):
        rel = os.path.relpath(p, bundle)
        for lib in needed:
            if lib in SYSTEM or lib in provided:
                continue
            if lib in CUDA:
                cuda_used.setdefault(lib, []).append(rel)
                continue
            violations.append({"file": rel, "needs": lib})
        for d in runpath:
            if d and not d.startswith("$ORIGIN"):
                outside_runpath.append({"file": rel, "runpath": d})
        for vs in versions.values():
            for v in vs:
                fam, num = _version_key(v)
                if fam in ("GLIBC", "GLIBCXX", "CXXABI", "GCC") and num > highest.get(fam, ((), ""))[0]:
                    highest[fam] = (num, v)
    result = {
        "ok": not violations and not outside_runpath and not errors,
        "elf_files": len(info),
        "violations": violations,
        "runpath_outside_bundle": outside_runpath,
        "errors": errors,
        "cuda_libraries": {k: sorted(v) for k, v in sorted(cuda_used.items())},
        "highest_versions_needed": {k: v[1] for k, v in sorted(highest.items())},
        "allowed_system": sorted(SYSTEM),
        "allowed_cuda": sorted(CUDA),
    }
    if search is not None:
        dirs = [d for d in search.split(":") if d]
        where, missing = {}, []
        for lib in sorted(cuda_used):
            hit = next((os.path.join(d, lib) for d in dirs if os.path.exists(os.path.join(d, lib))), None)
            if hit:
                where[lib] = hit
            elif lib not in DRIVER:
                missing.append(lib)
        result["resolved"] = where
        result["unresolved"] = missing
        result["search"] = dirs
        result["ok"] = result["ok"] and not missing
    return result


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--search"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if not os.path.isdir(argv[1]):
        print(f"bundle_closure: {argv[1]} is not a folder (make it with tests/gpu/make_bundle.sh)",
              file=sys.stderr)
        return 2
    r = check(argv[1], argv[3] if len(argv) == 4 else None)
    print(json.dumps(r, indent=1))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
