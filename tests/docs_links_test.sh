#!/usr/bin/env bash
# The docs link check can fail: on a small tree of Markdown files it passes clean links (a heading
# with code and punctuation, a repeated heading, a folder, a link inside a code block), and refuses
# each planted broken one (exit 1, naming file:line): a missing file, a missing heading in another
# file, a missing heading in the same file, a reference-style link to a missing file.
#   tests/docs_links_test.sh <tests dir>
set -u
checker="$1/docs_links.sh"
# shellcheck source=tests/checker_test_common.sh
source "$(dirname "$0")/checker_test_common.sh"
make_tree() {
  rm -rf "$tmp/t" && mkdir -p "$tmp/t/docs/decisions" "$tmp/t/run"
  cat >"$tmp/t/docs/guide.md" <<'EOF'
# Guide

## The `plan` command: options, formats (v2)

## Notes

## Notes
EOF
  cat >"$tmp/t/README.md" <<'EOF'
# Project

See [the guide](docs/guide.md), [its plan section](docs/guide.md#the-plan-command-options-formats-v2),
[the second notes](docs/guide.md#notes-1), [decisions](docs/decisions/) and [this page](#project).

```
[not a link](nowhere.md)
```
EOF
  printf '# Run\n\nBack to [the top](../README.md) and [a site](https://example.com/x.md).\n' >"$tmp/t/run/README.md"
}
make_tree; expect 0 "docs links: ok (3 Markdown files)" "a clean tree passes"
make_tree; printf 'And [gone](../docs/missing.md).\n' >>"$tmp/t/run/README.md"
expect 1 "run/README.md:4: broken link (../docs/missing.md)" "a missing file"
make_tree; printf '\nSee [x](docs/guide.md#the-plan-command).\n' >>"$tmp/t/README.md"
expect 1 "README.md:10: broken link (docs/guide.md#the-plan-command): no heading" "a missing heading"
make_tree; printf '\nSee [x](#notes-2).\n' >>"$tmp/t/docs/guide.md"
expect 1 "docs/guide.md:9: broken link (#notes-2)" "a missing heading in the same file"
make_tree; printf '\n[ref]: decisions/0009-none.md\n' >>"$tmp/t/docs/guide.md"
expect 1 "docs/guide.md:9: broken link (decisions/0009-none.md)" "a reference-style link"
exit $fail
