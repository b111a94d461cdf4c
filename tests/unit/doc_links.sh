#!/bin/sh
# Every relative link in the project's Markdown (README.md, docs/, the other top-level
# pages, examples/, bench/) resolves: the file or folder exists and, for a link to a
# heading ("page.md#anchor" or "#anchor"), the page has that heading, in the code host's
# spelling of anchors. Links in code blocks and code spans are not links.
set -u
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
exec python3 - "$src" <<'PY'
import os, re, sys

src = sys.argv[1]
skip_dirs = {".git", ".cache", "autom4te.cache", "node_modules", "__pycache__"}
pages = []
for top, dirs, files in os.walk(src):
    dirs[:] = [d for d in dirs if d not in skip_dirs and not d.startswith("build")]
    pages += [os.path.join(top, f) for f in files if f.endswith(".md")]

def prose(text):
    """The page without fenced code blocks and code spans."""
    text = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)

def slug(heading):
    h = re.sub(r"`|\*\*|__", "", heading.strip().lower())
    h = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", h)
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")

anchors = {}
def anchors_of(path):
    if path not in anchors:
        seen, out = {}, set()
        with open(path, encoding="utf-8") as f:
            body = re.sub(r"^(```|~~~).*?^\1[^\n]*$", "", f.read(), flags=re.S | re.M)
        for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", body, re.M):
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        out |= set(re.findall(r'<a (?:name|id)="([^"]+)"', body))
        anchors[path] = out
    return anchors[path]

bad = 0
links = 0
for page in sorted(pages):
    with open(page, encoding="utf-8") as f:
        text = prose(f.read())
    targets = re.findall(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)", text)
    targets += re.findall(r"^\s*\[[^\]]+\]:\s*(\S+)", text, re.M)
    for t in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I):
            continue  # http:, https:, mailto:
        links += 1
        path, _, anchor = t.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        rel = os.path.relpath(page, src)
        if not os.path.exists(where):
            print(f"{rel}: the link '{t}': no {os.path.relpath(where, src)}")
            bad += 1
        elif anchor and where.endswith(".md") and anchor not in anchors_of(where):
            print(f"{rel}: the link '{t}': {os.path.relpath(where, src)} has no heading '#{anchor}'")
            bad += 1
print(f"doc_links: {links} links in {len(pages)} pages, {bad} broken")
sys.exit(1 if bad else 0)
PY
