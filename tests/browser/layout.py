"""What the layout tests measure in the page, as JavaScript run by Playwright.

Each function returns a list of problems in words (empty when the page is right), so a
failing test names every element at fault at once.
"""

from __future__ import annotations

from typing import Any

# Every element inside each box stays inside it, unless an element between them scrolls
# (its content is reachable) — and the page itself never scrolls sideways.
_OVERFLOW = """
(selector) => {
  const problems = [];
  const describe = (el) => {
    const cls = typeof el.className === 'string' ? el.className.trim() : '';
    return el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
      (cls ? '.' + cls.split(/\\s+/).join('.') : '');
  };
  const boxes = document.querySelectorAll(selector);
  if (!boxes.length) problems.push('nothing matches ' + selector);
  for (const box of boxes) {
    const outer = box.getBoundingClientRect();
    for (const el of box.querySelectorAll('*')) {
      let scrolls = false;
      for (let p = el.parentElement; p && p !== box; p = p.parentElement) {
        const o = getComputedStyle(p).overflowX;
        if (o === 'auto' || o === 'scroll') { scrolls = true; break; }
      }
      if (scrolls) continue;
      const r = el.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.right > outer.right + 1 || r.left < outer.left - 1) {
        problems.push(describe(el) + ' is ' + Math.round(r.right - outer.right) +
          ' px wider than ' + describe(box) + ': ' + (el.textContent || '').trim().slice(0, 60));
      }
    }
  }
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + 1) {
    problems.push('the page scrolls sideways: ' + doc.scrollWidth + ' > ' + doc.clientWidth);
  }
  return problems.slice(0, 20);
}
"""

# Each visible occurrence of the word (outside tool output in <pre>) is laid out on one line.
_ONE_LINE = """
([selector, word]) => {
  const problems = [];
  let seen = 0;
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (node.parentElement.closest('pre')) continue;
      for (let i = node.data.indexOf(word); i >= 0; i = node.data.indexOf(word, i + 1)) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + word.length);
        const rects = [...range.getClientRects()].filter((r) => r.width > 0);
        if (!rects.length) continue;
        seen += 1;
        if (rects.length !== 1) {
          const parent = node.parentElement;
          problems.push(word + ' is broken over ' + rects.length + ' lines in ' +
            parent.tagName.toLowerCase() + '.' + parent.className + ': ' +
            node.data.trim().slice(0, 60));
        }
      }
    }
  }
  return {seen, problems};
}
"""

# Every hyphenated or dotted identifier (payment-service, trace-18, refund-reconcile-16)
# of at most ``longest`` characters, outside tool output in <pre>, is laid out on one line.
_IDENTIFIERS_WHOLE = """
([selector, longest]) => {
  const problems = [];
  const pattern = /[A-Za-z0-9_]+(?:[-.][A-Za-z0-9_]+)+/g;
  for (const root of document.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      if (node.parentElement.closest('pre, svg, textarea')) continue;
      for (const match of node.data.matchAll(pattern)) {
        if (match[0].length > longest) continue;
        const range = document.createRange();
        range.setStart(node, match.index);
        range.setEnd(node, match.index + match[0].length);
        const rects = [...range.getClientRects()].filter((r) => r.width > 0);
        if (rects.length > 1) {
          problems.push(match[0] + ' is broken over ' + rects.length + ' lines in ' +
            node.parentElement.tagName.toLowerCase() + '.' + node.parentElement.className);
        }
      }
    }
  }
  return [...new Set(problems)].slice(0, 20);
}
"""

# Labels the page shows for codes: the visible text of each label is never the code itself.
_RAW_CODES = """
([selector, codes]) => {
  const problems = [];
  const pattern = new RegExp('(^|[^A-Za-z_])(' + codes.join('|') + ')($|[^A-Za-z_])');
  for (const el of document.querySelectorAll(selector)) {
    const text = el.innerText || '';
    const match = text.match(pattern);
    if (match) problems.push('raw code ' + match[2] + ' shown in: ' + text.trim().slice(0, 80));
  }
  return problems.slice(0, 20);
}
"""

# The x-axis labels of each chart never overlap each other.
_AXIS_OVERLAP = """
() => {
  const problems = [];
  for (const svg of document.querySelectorAll('svg.rp-chart')) {
    const labels = [...svg.querySelectorAll('text[text-anchor="middle"]')]
      .map((t) => [t.textContent, t.getBoundingClientRect()]);
    for (let i = 1; i < labels.length; i++) {
      const [a, ra] = labels[i - 1], [b, rb] = labels[i];
      if (ra.right > rb.left + 0.5) problems.push('axis labels overlap: ' + a + ' / ' + b);
    }
  }
  return problems;
}
"""

CODES = [
    "accepted",
    "demoted",
    "direct_observation",
    "reasonable_inference",
    "overstated",
    "unsupported",
    "allowed_claim",
    "missing_info",
    "evidence_gap",
    "parsed_v2",
    "excerpt_not_found",
    "claim_fact_unbound",
    "root_cause",
    "symptom",
    "impact",
    "direct",
    "no_data",
    "ok",
    "guard_failed",
    "malformed",
    "PASS",
    "LOW_CONFID",
    "REJECT",
]


def overflow_problems(page: Any, selector: str) -> list[str]:
    return page.evaluate(_OVERFLOW, selector)


def broken_words(page: Any, selector: str, word: str) -> tuple[int, list[str]]:
    result = page.evaluate(_ONE_LINE, [selector, word])
    return result["seen"], result["problems"]


def broken_identifiers(page: Any, selector: str, *, longest: int = 40) -> list[str]:
    return page.evaluate(_IDENTIFIERS_WHOLE, [selector, longest])


def raw_codes(page: Any, selector: str) -> list[str]:
    return page.evaluate(_RAW_CODES, [selector, CODES])


def overlapping_axis_labels(page: Any) -> list[str]:
    return page.evaluate(_AXIS_OVERLAP)
