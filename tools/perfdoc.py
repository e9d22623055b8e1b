"""docs/performance.md holds one section per benchmark script, between
<!-- begin NAME --> and <!-- end NAME --> lines; each script rewrites its own
section and leaves the others (and anything outside them) as they are."""
import os
import sys

TITLE = "# Performance\n\nEach section below is written by the script it names, from one run of it; re-run the script to refresh its section.\n"


def write_section(path, name, text):
    begin, end = f"<!-- begin {name} -->", f"<!-- end {name} -->"
    block = f"{begin}\n{text.rstrip()}\n{end}\n"
    page = open(path).read() if os.path.exists(path) else TITLE
    if begin in page and end in page:
        head, rest = page.split(begin, 1)
        tail = rest.split(end, 1)[1].lstrip("\n")
        page = head + block + ("\n" + tail if tail else "")
    else:
        page = page.rstrip("\n") + "\n\n" + block
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(page)
    os.replace(tmp, path)  # a reader never sees half a page


def emit(out, name, text):
    """Writes `text` as section `name` of the page `out`, or prints it when
    no page is given."""
    if out:
        write_section(out, name, text)
        print(f"wrote its section of {out}", file=sys.stderr)
    else:
        print(text)
