#!/usr/bin/env bash
# Every relative link in the project's Markdown points somewhere real: the file (or folder) exists,
# and a `#anchor` names a heading of the target, slugged as GitHub does. Prints each broken link as
# file:line and exits 1 if any. (tests/docs_links_test.sh proves it can fail.)
#   tests/docs_links.sh [source dir]
# The files checked: those git tracks or would track (new, not ignored) when the tree is a git
# checkout, else every *.md outside build folders. Links inside code (fenced blocks, `spans`) and
# links to other sites (http:, https:, mailto:) are not checked.
set -u
top=${1:-.}
cd "$top" || exit 2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard -- '*.md' | sort -u)
else
  files=$(find . -name '*.md' -not -path './build*' -not -path '*/.git/*' | sed 's|^\./||' | sort)
fi
# Keep only files that exist (a file deleted but not yet committed is still listed by git).
existing=$(for f in $files; do [ -f "$f" ] && echo "$f"; done)
[ -n "$existing" ] || { echo "docs links: no Markdown files under $top"; exit 2; }
echo "$existing" | python3 -c '
import os, re, sys

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code, with inline code spans blanked."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield n, re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)


def slug(heading):
    """GitHub anchor of a heading: markup dropped, lowercase, punctuation removed, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


anchor_cache = {}


def anchors(path):
    if path not in anchor_cache:
        seen, found = {}, set()
        fenced = False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                    continue
                m = None if fenced else re.match(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(1))
                    found.add(s if s not in seen else "%s-%d" % (s, seen[s]))
                    seen[s] = seen.get(s, 0) + 1
                for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                    found.add(a)
        anchor_cache[path] = found
    return anchor_cache[path]


def problem(source, target):
    """Why the link target from source is broken, or None."""
    path, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
    if not os.path.exists(resolved):
        return "no such file: %s" % resolved
    if anchor and resolved.endswith(".md") and anchor.lower() not in anchors(resolved):
        return "no heading #%s in %s" % (anchor, resolved)
    return None


broken = 0
files = [l.strip() for l in sys.stdin if l.strip()]
for source in files:
    for n, line in prose_lines(source):
        targets = LINK.findall(line)
        ref = REFDEF.match(line)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            if EXTERNAL.match(target) or target.startswith("//"):
                continue
            why = problem(source, target)
            if why:
                print("%s:%d: broken link (%s): %s" % (source, n, target, why))
                broken += 1
if broken:
    print("docs links: %d broken in %d Markdown files" % (broken, len(files)))
    sys.exit(1)
print("docs links: ok (%d Markdown files)" % len(files))
'
