'use strict';

const { SemVer } = require('./semver');
const { parse, compare } = require('./functions');
const { Comparator } = require('./comparator');
const {
  parsePartial,
  expandPrimitive,
  expandTilde,
  expandCaret,
  expandHyphen,
} = require('./desugar');

const HYPHEN = /^(\S+)\s+-\s+(\S+)$/;
const TOKEN = /^(<=|>=|<|>|=|\^|~>|~|)(.*)$/;

function invalid(range) {
  return new TypeError(`Invalid range: ${range}`);
}

function partialOrThrow(text, range) {
  const pv = parsePartial(text);
  if (!pv) {
    throw invalid(range);
  }
  return pv;
}

function expandToken(token, range) {
  const [, op, rest] = TOKEN.exec(token);
  const pv = partialOrThrow(rest, range);
  switch (op) {
    case '^':
      return expandCaret(pv);
    case '~':
    case '~>':
      return expandTilde(pv);
    default:
      return expandPrimitive(op, pv);
  }
}

/** Parses one "||"-separated part of a range into a list of comparators. */
function parseComparatorSet(text, range) {
  text = text.trim();
  let parts;
  const hyphen = HYPHEN.exec(text);
  if (hyphen) {
    parts = expandHyphen(partialOrThrow(hyphen[1], range), partialOrThrow(hyphen[2], range));
  } else {
    // allow whitespace between an operator and its version: ">= 1.2.3"
    const tokens = text.replace(/(<=|>=|<|>|=|\^|~>|~)\s+/g, '$1').split(/\s+/).filter(Boolean);
    parts = [];
    for (const token of tokens) {
      parts.push(...expandToken(token, range));
    }
  }
  if (parts.length === 0) {
    return [new Comparator('')];
  }
  return parts.map((p) => new Comparator(p));
}

function testSet(set, version) {
  for (const c of set) {
    if (!c.test(version)) {
      return false;
    }
  }
  if (version.prerelease.length) {
    // A prerelease only matches if the range explicitly mentions a
    // prerelease of the same major.minor.patch: ">=1.2.3-beta.1 <2.0.0"
    // allows 1.2.3-beta.4 but not 1.4.0-beta.1.
    return set.some(
      (c) => !c.isAny && c.semver.prerelease.length && c.semver.compareMain(version) === 0
    );
  }
  return true;
}

class Range {
  constructor(range) {
    if (range instanceof Range) {
      return range;
    }
    if (typeof range !== 'string') {
      throw invalid(range);
    }
    this.raw = range;
    this.set = range.split('||').map((part) => parseComparatorSet(part, range));
    this.range = this.format();
  }

  format() {
    return this.set
      .map((set) => {
        const s = set.map((c) => c.toString()).join(' ').trim();
        return s === '' ? '*' : s;
      })
      .join('||');
  }

  toString() {
    return this.range;
  }

  test(version) {
    const v = parse(version);
    if (!v) {
      return false;
    }
    return this.set.some((set) => testSet(set, v));
  }
}

function toRange(range) {
  try {
    return new Range(range);
  } catch (err) {
    return null;
  }
}

function satisfies(version, range) {
  const r = toRange(range);
  return r ? r.test(version) : false;
}

function validRange(range) {
  const r = toRange(range);
  return r ? r.range : null;
}

function toComparators(range) {
  return new Range(range).set.map((set) => set.map((c) => c.toString() || '*'));
}

function pick(versions, range, better) {
  const r = toRange(range);
  if (!r) {
    return null;
  }
  let best = null;
  for (const v of versions) {
    if (r.test(v) && (best === null || better(compare(v, best)))) {
      best = v;
    }
  }
  return best;
}

function maxSatisfying(versions, range) {
  return pick(versions, range, (c) => c > 0);
}

function minSatisfying(versions, range) {
  return pick(versions, range, (c) => c < 0);
}

/** The lowest version that can possibly satisfy the range, or null. */
function minVersion(range) {
  const r = new Range(range);
  if (r.test('0.0.0')) {
    return new SemVer('0.0.0');
  }
  let best = null;
  for (const set of r.set) {
    let low = null;
    for (const c of set) {
      if (c.isAny) continue;
      let candidate = null;
      if (c.operator === '' || c.operator === '>=') {
        candidate = c.semver;
      } else if (c.operator === '>') {
        candidate = c.semver.prerelease.length
          ? new SemVer(`${c.semver.version}.0`)
          : new SemVer(`${c.semver.major}.${c.semver.minor}.${c.semver.patch + 1}`);
      }
      if (candidate && (low === null || candidate.compare(low) > 0)) {
        low = candidate;
      }
    }
    if (low && testSet(set, low) && (best === null || low.compare(best) < 0)) {
      best = low;
    }
  }
  return best;
}

module.exports = {
  Range,
  satisfies,
  validRange,
  toComparators,
  maxSatisfying,
  minSatisfying,
  minVersion,
};
