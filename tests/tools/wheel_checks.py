#!/usr/bin/env python3
"""The wheel carries libonyx and needs only system libraries that the
README's packages install (issue 22): `auditwheel show --json` lists the
shared libraries the wheel loads from outside itself and outside the
manylinux policy; each must belong (dpkg -S) to one of the Debian packages
tools/dev.sh installs, or to a package those depend on (apt-cache depends
--recurse, virtual packages resolved through Provides). Exits non-zero,
naming the library, otherwise.

    wheel_checks.py WHEEL [DEV_SH]
"""
import json
import os
import re
import subprocess
import sys
import zipfile


def readme_packages(dev_sh):
    text = open(dev_sh).read()
    m = re.search(r'local pkgs="([^"]*)"', text)
    assert m, f"{dev_sh}: no 'local pkgs=\"...\"' list of Debian packages"
    return m.group(1).replace("\\\n", " ").split()


def dependency_closure(pkgs):
    out = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                          "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + pkgs,
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        line = line.strip()
        if not line:
            continue
        # "pkg" at the start of a block, "Depends: pkg" / "|Depends: <virtual>" below it
        name = line.split(":", 1)[1].strip() if ":" in line and not line.startswith("<") else line
        names.add(name.strip("<>").split(":")[0])
    return names


def owner(path):
    """The Debian package that installed `path` (merged /usr: /lib is /usr/lib)."""
    real = os.path.realpath(path)
    for p in dict.fromkeys([path, real, "/usr" + real if not real.startswith("/usr/") else real]):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0]
    return None


def provides(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f=${Provides}", pkg], capture_output=True, text=True)
    return {p.strip().split(" ")[0] for p in r.stdout.split(",") if p.strip()}


def main(argv):
    wheel = argv[1]
    dev_sh = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "tools", "dev.sh")
    names = zipfile.ZipFile(wheel).namelist()
    inside = [n for n in names if re.search(r"(^|/)libonyx\.so", n)]
    if not inside:
        print(f"{wheel}: libonyx is not inside the wheel", file=sys.stderr)
        return 1
    show = json.loads(subprocess.run(["auditwheel", "show", "--json", wheel], check=True,
                                     capture_output=True, text=True).stdout)
    external = show["external_libs"]
    closure = dependency_closure(readme_packages(dev_sh))
    bad = 0
    print(f"{os.path.basename(wheel)}: tag {show['overall_tag']}, libonyx inside ({inside[0]}), "
          f"{len(external)} system libraries:")
    for lib, path in sorted(external.items()):
        if "onyx" in lib:
            print(f"  {lib}: an Onyx library loaded from outside the wheel ({path})", file=sys.stderr)
            bad += 1
            continue
        pkg = owner(path) if path else None
        ok = pkg is not None and (pkg in closure or bool(provides(pkg) & closure))
        print(f"  {lib} -> {path} ({pkg or 'no package'}){'' if ok else '  NOT from the README packages'}")
        bad += not ok
    if bad:
        print(f"{wheel}: {bad} librar{'y' if bad == 1 else 'ies'} not installed by the README's packages",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
