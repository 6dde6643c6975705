#!/usr/bin/python3
"""Every script, test and program runs the Python that scripts/install-deps.sh provisions
(/usr/bin/python3, Debian's, with numpy, torch, transformers and PEFT) or the peers' environment
that scripts/install-peers.sh makes, never whichever `python3` comes first on PATH: on a fresh
machine that is often a pyenv shim without numpy, and a test that passed where someone had
installed numpy by hand failed there. Flags, with file and line:
  - a shell line that runs `python3` by name (tests/, bench/, scripts/);
  - a Python or C++ string literal naming python3 (a subprocess started by name);
  - a `#!/usr/bin/env python3` line in tests/ or scripts/ (a script run directly).
bench/gpu_check.sh and scripts/pkg-config-lite.py are left alone: they run on the lent GPU
machine, whose Python is whatever that machine has.
    test_interpreters.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
ON_THE_DEVICE = {"bench/gpu_check.sh", "scripts/pkg-config-lite.py"}
# `python3` as a command: at a line's start or after a shell operator, a `$(`, a backtick or a
# blank, and not a path's last part (/usr/bin/python3) or a package's name (python3-numpy).
SHELL_CALL = re.compile(r"(^|[\s;&|(`{])python3(\s|$|\))")
STRING = re.compile(r"""["']python3["']""")

bad = []
checked = 0
for folder in ("tests", "bench", "scripts", "runtime"):
    for path in sorted((root / folder).rglob("*")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or rel in ON_THE_DEVICE or path.suffix not in (".sh", ".py", ".cpp", ".hpp"):
            continue
        checked += 1
        in_packages = False  # install-deps.sh's list of Debian packages names python3 as one
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            code = line.split("#", 1)[0] if path.suffix == ".sh" else line
            if path.suffix == ".sh":
                if re.match(r"\s*packages=\(", line):
                    in_packages = True
                if in_packages:
                    in_packages = not line.strip().startswith(")")
                    continue
                if SHELL_CALL.search(code):
                    bad.append(f"{rel}:{n}: runs python3 from PATH; call /usr/bin/python3 (scripts/install-deps.sh's)")
            if STRING.search(code):
                bad.append(f"{rel}:{n}: starts \"python3\" from PATH; use /usr/bin/python3 or sys.executable")
            if n == 1 and line.startswith("#!/usr/bin/env python3") and folder in ("tests", "scripts"):
                bad.append(f"{rel}:1: '#!/usr/bin/env python3' runs PATH's Python when executed; use #!/usr/bin/python3")
print("\n".join(bad))
print(f"{checked} files checked, {len(bad)} running a Python from PATH")
sys.exit(1 if bad else 0)
