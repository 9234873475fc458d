#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Build-time generation from the CLI itself (cli/CMakeLists.txt):
#   gen.sh completion SPECKV OUT      bash completion (`speckv --bash-completion`)
#   gen.sh man1 SPECKV OUT GO_MD2MAN  speckv(1): `speckv --help`, then a section
#                                      per verb with its `--help`, as markdown
#                                      (OUT.md), converted by go-md2man.
set -eu
what=$1 bin=$2 out=$3
case $what in
completion)
    "$bin" --bash-completion >"$out.tmp"
    mv "$out.tmp" "$out"
    ;;
man1)
    md2man=$4
    version=$("$bin" --version | sed 's/^speckv //')
    # Help text goes into code blocks; a line starting with '.' or a quote
    # would be a troff request there, so it is indented by one space.
    block() { printf '```\n'; sed -e "s/^\([.']\)/ \1/"; printf '```\n\n'; }
    {
        printf '%% SPECKV 1 "" "speckv %s" "User Commands"\n\n' "$version"
        printf '# NAME\n\nspeckv - create, inspect, check and benchmark KV-cache pools\n\n'
        printf '# SYNOPSIS\n\n**speckv** *VERB* [*OPTIONS*] [*ARGS*]\n\n**speckv** **-V**|**--version**\n\n'
        printf '# DESCRIPTION\n\n'
        "$bin" --help | block
        printf '# COMMANDS\n\nEach verb below takes **--help**; every verb takes **--json**: its result as one JSON '
        printf 'object on stdout, and on failure the object {"error": {"code": N, "name": "SPECKV_E...", "message": "..."}} '
        printf 'on stdout with a non-zero exit status.\n\n'
        "$bin" --list-commands | while read -r verb; do
            printf '## speckv %s\n\n' "$verb"
            # shellcheck disable=SC2086
            "$bin" $verb --help | block
        done
        printf '# EXIT STATUS\n\n0: success. 1: the command failed, or found problems (**pool check**, **codec check**). '
        printf '2: bad usage (an unknown verb or option names the nearest valid one), or the command could not run.\n\n'
        printf '# PROGRESS\n\nLong commands (**codec check**, **codec bench**, **trace replay**, **pool check** of a '
        printf 'large pool) show progress on stderr when stderr is a terminal; **--no-progress** or **-q** turns it off.\n\n'
        printf '# SEE ALSO\n\n**speckv**(3), **daxctl**(1), **numactl**(8)\n'
    } >"$out.md"
    "$md2man" -in "$out.md" -out "$out"
    ;;
*) echo "gen.sh: unknown target $what" >&2; exit 2 ;;
esac
