'use strict';

const { SemVer, toSemVer } = require('./semver');

function parse(version) {
  try {
    return toSemVer(version);
  } catch (err) {
    return null;
  }
}

function valid(version) {
  const v = parse(version);
  return v ? v.version : null;
}

function clean(version) {
  if (typeof version !== 'string') return null;
  return valid(version.trim().replace(/^[=v]+/, ''));
}

function compare(a, b) {
  return toSemVer(a).compare(toSemVer(b));
}

function rcompare(a, b) {
  return compare(b, a);
}

/** Like compare, but falls back to comparing build metadata. */
function compareBuild(a, b) {
  const x = toSemVer(a);
  const y = toSemVer(b);
  const c = x.compare(y);
  if (c !== 0) return c;
  const bx = x.build.join('.');
  const by = y.build.join('.');
  return bx === by ? 0 : bx < by ? -1 : 1;
}

const gt = (a, b) => compare(a, b) > 0;
const gte = (a, b) => compare(a, b) >= 0;
const lt = (a, b) => compare(a, b) < 0;
const lte = (a, b) => compare(a, b) <= 0;
const eq = (a, b) => compare(a, b) === 0;
const neq = (a, b) => compare(a, b) !== 0;

function cmp(a, op, b) {
  switch (op) {
    case '':
    case '=':
    case '==':
      return eq(a, b);
    case '!=':
      return neq(a, b);
    case '>':
      return gt(a, b);
    case '>=':
      return gte(a, b);
    case '<':
      return lt(a, b);
    case '<=':
      return lte(a, b);
    default:
      throw new TypeError(`Invalid operator: ${op}`);
  }
}

function sort(list) {
  return list.slice().sort(compareBuild);
}

function rsort(list) {
  return list.slice().sort((a, b) => compareBuild(b, a));
}

function inc(version, release, identifier) {
  const v = parse(version);
  if (!v) return null;
  try {
    return v.inc(release, identifier).version;
  } catch (err) {
    return null;
  }
}

/** Returns the most significant component that differs, or null if equal. */
function diff(a, b) {
  const x = toSemVer(a);
  const y = toSemVer(b);
  if (x.compare(y) === 0) return null;
  const pre = x.prerelease.length || y.prerelease.length ? 'pre' : '';
  if (x.major !== y.major) return `${pre}major`;
  if (x.minor !== y.minor) return `${pre}minor`;
  if (x.patch !== y.patch) return `${pre}patch`;
  return 'prerelease';
}

const major = (v) => toSemVer(v).major;
const minor = (v) => toSemVer(v).minor;
const patch = (v) => toSemVer(v).patch;
function prerelease(v) {
  const p = parse(v);
  return p && p.prerelease.length ? p.prerelease.slice() : null;
}

module.exports = {
  SemVer,
  parse,
  valid,
  clean,
  compare,
  rcompare,
  compareBuild,
  gt,
  gte,
  lt,
  lte,
  eq,
  neq,
  cmp,
  sort,
  rsort,
  inc,
  diff,
  major,
  minor,
  patch,
  prerelease,
};
