#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Instruction-set check of a built libspeckv (issue 26; the rule is lib/util/isa_target.h).

Every function of the library must run on the x86-64 baseline, except the kernels of the
ISA-specific files, which are reached only after a runtime CPU check (lib/util/cpu.h). A function
compiled for a wider ISA that is shared between objects (a weak/COMDAT copy of an inline
function or template) is the bug this catches: the linker may keep that copy for the whole
library, and scalar code then dies with SIGILL on a CPU without the ISA.

  tools/check_isa.py LIBRARY OBJECT_DIR

LIBRARY: libspeckv.so (not stripped). OBJECT_DIR: where the library's objects are
(build/PRESET/lib/CMakeFiles/speckv_objs.dir). Prints every function of the library that
holds instructions beyond the baseline, with the object it is allowed in, and fails (exit 1)
when one is not allowed: allowed are the strong (non-weak) functions defined in the
ISA-specific objects (*_avx2.cc.o, *_avx512.cc.o) and in the two baseline files that use
per-function target attributes (crc32c.cc.o, flush.cc.o). Exit 77 where it cannot check
(not x86-64, no objdump/nm).
"""
import os
import re
import shutil
import subprocess
import sys

# Mnemonics beyond x86-64's SSE2 baseline. Every VEX/EVEX instruction starts with 'v'
# (AVX, AVX2, FMA, F16C, AVX-512, VPCLMULQDQ); AVX-512 mask instructions start with 'k'.
# tzcnt is left out: GCC's baseline __builtin_ctz emits 'rep bsf', which objdump prints
# as tzcnt (and which runs as bsf on CPUs without BMI1).
WIDE = re.compile(r'^(v(?!err|erw)[a-z0-9]+|k(and|andn|or|xor|xnor|not|mov|shiftl|shiftr|test|ortest|add|unpck)[bwdq]*'
                  r'|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|popcnt'
                  r'|crc32[bwlq]?|pclmul[a-z]*|pcmp[ei]str[im]'
                  r'|pshufb|palignr|ph(add|sub)[a-z]*|pmaddubsw|pmulhrsw|psign[bwd]|pabs[bwd]'
                  r'|pblendvb|pblendw|blendv?p[sd]|ptest|pmin(sb|sd|uw|ud)|pmax(sb|sd|uw|ud)|pmulld|pmuldq'
                  r'|pcmp(eq|gt)q|packusdw|pmov[sz]x[a-z]*|pextr[bdq]|pinsr[bdq]|round[ps][sd]|dpp[sd]'
                  r'|insertps|extractps|mpsadbw|phminposuw|movntdqa)$')
ISA_OBJECT = re.compile(r'(_avx2|_avx512)[a-z0-9_]*\.cc\.o$|(^|/)(crc32c|flush)\.cc\.o$')


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

HEAD = re.compile(r'^[0-9a-f]+ <(.+)>:$')


def scan(path):
    """{function: {mnemonic: count}} of the functions in `path` holding wide instructions."""
    wide = {}
    func = None
    dis = subprocess.Popen(['objdump', '-d', '--no-show-raw-insn', '-M', 'att', path], stdout=subprocess.PIPE,
                           text=True)
    for line in dis.stdout:
        m = HEAD.match(line)
        if m:
            func = m.group(1)
            continue
        if func is None or not line.startswith(' '):
            continue
        cols = line.rstrip('\n').split('\t')
        if len(cols) < 2 or not cols[1].split():
            continue
        words = cols[1].split()
        mn = words[0]
        if mn in ('rep', 'repz', 'repnz', 'lock', 'notrack', 'bnd', 'data16') and len(words) > 1:
            mn = words[1]
        if WIDE.match(mn):
            wide.setdefault(func, {}).setdefault(mn, 0)
            wide[func][mn] += 1
    return wide if dis.wait() == 0 else None


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    lib, objdir = sys.argv[1], sys.argv[2]
    if os.uname().machine not in ('x86_64', 'amd64'):
        print('check_isa: not x86-64; nothing to check')
        return 77
    if not shutil.which('objdump') or not shutil.which('nm'):
        print('check_isa: objdump/nm not found (binutils); cannot check')
        return 77
    objs = [os.path.join(d, f) for d, _, fs in os.walk(objdir) for f in fs if f.endswith('.o')]
    if not objs:
        print(f'check_isa: no objects under {objdir}', file=sys.stderr)
        return 2
    allowed = {}  # mangled name -> object
    latent = []  # weak functions compiled wide in an ISA-specific object
    isa_objs = 0
    for o in objs:
        if not ISA_OBJECT.search(o):
            continue
        isa_objs += 1
        weak = set()
        for line in run(['nm', '--defined-only', o]).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ('t', 'T'):  # strong text symbols only: W/V/u are shared
                allowed[parts[2]] = os.path.basename(o)
            elif len(parts) == 3 and parts[1] in ('W', 'V', 'u'):
                weak.add(parts[2])
        # A shared (weak) function of an ISA-specific object compiled wide is a SIGILL waiting for
        # a link order that keeps that copy, whether or not this link kept it.
        for f, mns in (scan(o) or {}).items():
            if f in weak:
                latent.append((f'{f} in {os.path.basename(o)}', ', '.join(sorted(mns))))
    wide = scan(lib)
    if wide is None:
        print(f'check_isa: objdump failed on {lib}', file=sys.stderr)
        return 2
    bad = []
    for f in sorted(wide):
        base = f.split('@')[0]
        mns = wide[f]
        desc = ', '.join(f'{k} x{v}' for k, v in sorted(mns.items(), key=lambda kv: -kv[1])[:4])
        if base in allowed:
            continue
        bad.append((f, desc))
    ok_count = len([f for f in wide if f.split('@')[0] in allowed])
    print(f'check_isa: {lib}')
    print(f'  {isa_objs} ISA-specific objects, {len(allowed)} functions allowed wide instructions')
    print(f'  {ok_count} functions hold instructions beyond x86-64 baseline, all in ISA-specific objects')
    if latent:
        print(f'  FAIL: {len(latent)} shared (weak/COMDAT) functions compiled for a wider ISA in ISA-specific objects:')
        for f, desc in latent:
            print(f'    {f}  [{desc}]')
    if bad:
        names = {f: f for f, _ in bad}
        try:
            dem = run(['c++filt'] + [f for f, _ in bad]).splitlines()
            names = dict(zip([f for f, _ in bad], dem))
        except (OSError, subprocess.CalledProcessError):
            pass
        print(f'  FAIL: {len(bad)} functions outside the ISA-specific kernels hold instructions beyond the baseline:')
        for f, desc in bad:
            print(f'    {names[f]}  [{desc}]')
    if bad or latent:
        print('  (lib/util/isa_target.h: include every header before SPECKV_TARGET_BEGIN; no -m flags)')
        return 1
    print('  OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
