#!/usr/bin/env python3
"""A minimal pkg-config for machines that lack one (the lent GPU machine: bench/gpu_check.sh).

Reads plain .pc files (variables, Version, Cflags, Libs; no Requires) from PKG_CONFIG_PATH and
PKG_CONFIG_LIBDIR, enough for meson to find the header-only packages that
scripts/vendor-headers.sh writes. Answers --version, --modversion, --cflags, --libs,
--variable=NAME and --exists; other options are ignored."""
import os
import re
import sys


def find(name):
    dirs = os.environ.get('PKG_CONFIG_PATH', '') + ':' + os.environ.get('PKG_CONFIG_LIBDIR', '')
    for d in filter(None, dirs.split(':')):
        path = os.path.join(d, name + '.pc')
        if os.path.isfile(path):
            return path
    return None


def parse(path):
    variables = {'pcfiledir': os.path.dirname(os.path.abspath(path))}
    fields = {}
    expand = lambda s: re.sub(r'\$\{(\w+)\}', lambda m: variables.get(m.group(1), ''), s)
    for line in open(path, encoding='utf-8'):
        line = line.split('#', 1)[0].strip()
        m = re.match(r'^(\w+)\s*([=:])\s*(.*)$', line)
        if not m:
            continue
        key, sep, value = m.groups()
        if sep == '=':
            variables[key] = expand(value)
        else:
            fields[key] = expand(value)
    return variables, fields


def main(argv):
    options = [a for a in argv if a.startswith('--')]
    names = [a for a in argv if not a.startswith('--') and not re.match(r'^[<>=!]', a) and not a[0].isdigit()]
    if '--version' in options:
        print('1.8.1')
        return 0
    out = []
    for name in names:
        path = find(name)
        if path is None:
            print(f"Package {name} was not found in the pkg-config search path.", file=sys.stderr)
            return 1
        variables, fields = parse(path)
        for option in options:
            if option == '--modversion':
                print(fields.get('Version', ''))
            elif option == '--cflags':
                out.append(fields.get('Cflags', ''))
            elif option == '--libs':
                out.append(fields.get('Libs', ''))
            elif option.startswith('--variable='):
                print(variables.get(option.split('=', 1)[1], ''))
    if out:
        print(' '.join(s for s in out if s))
    return 0


sys.exit(main(sys.argv[1:]))
