#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every file the docs and the public header point to exists (issue 20).

Checks, in the tracked files of the repository:
  - relative Markdown links [text](path) and [text](path#anchor) in every *.md file;
  - every `docs/NAME.md`, `README.md`, `CHANGELOG.md`, `DESIGN.md`-style path named in
    include/speckv.h and in the sources under lib/, cli/ and tools/.
Prints each dangling reference with its file and line; exit 1 if there is one.
  tools/check_links.py [REPO_ROOT]
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')
PATH_IN_CODE = re.compile(r'(?<![\w/.-])((?:docs|bench|tests|tools|fpga|bindings|examples|data)/[\w./-]*\.md|'
                          r'(?:README|CHANGELOG|DESIGN|NOTICE|LICENSE)(?:\.md)?)(?![\w/-])')


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..'))
    files = subprocess.run(['git', '-C', root, 'ls-files'], capture_output=True, text=True, check=True).stdout.split()
    tracked = set(files)
    bad = []
    for f in files:
        path = os.path.join(root, f)
        if not os.path.isfile(path):
            continue
        if f.endswith('.md'):
            text = open(path, encoding='utf-8', errors='replace').read()
            in_code = False
            for n, line in enumerate(text.split('\n'), 1):
                if line.lstrip().startswith('```'):
                    in_code = not in_code
                    continue
                if in_code:
                    continue
                for target in LINK.findall(line):
                    if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith('#'):
                        continue  # URLs, mailto:, in-page anchors
                    rel = target.split('#')[0]
                    if not rel:
                        continue
                    dest = os.path.normpath(os.path.join(os.path.dirname(f), rel))
                    if dest not in tracked and not os.path.isdir(os.path.join(root, dest)):
                        bad.append(f'{f}:{n}: link to {target} ({dest} does not exist)')
        elif f == 'include/speckv.h' or (f.split('/')[0] in ('lib', 'cli', 'tools') and
                                          f.endswith(('.h', '.cc', '.c', '.py', '.sh'))):
            if f == 'tools/check_links.py':
                continue
            text = open(path, encoding='utf-8', errors='replace').read()
            for n, line in enumerate(text.split('\n'), 1):
                for ref in PATH_IN_CODE.findall(line):
                    cands = [ref, ref + '.md'] if not ref.endswith('.md') else [ref]
                    if not any(c in tracked for c in cands):
                        bad.append(f'{f}:{n}: names {ref}, which does not exist')
    for b in bad:
        print(b)
    print(f'check_links: {len(files)} files, {len(bad)} dangling references')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
