'use strict';

// Turns the range shorthands (x-ranges, ~, ^ and hyphen ranges) into lists of
// primitive comparator strings such as ">=1.2.0" and "<1.3.0".

const { NUM } = require('./semver');

const XNUM = `x|X|\\*|${NUM}`;
const PRE = '[0-9A-Za-z-]+(?:\\.[0-9A-Za-z-]+)*';
const PARTIAL = new RegExp(
  `^v?(${XNUM})(?:\\.(${XNUM})(?:\\.(${XNUM})(?:-(${PRE}))?(?:\\+${PRE})?)?)?$`
);

function isWild(part) {
  return part === undefined || part === 'x' || part === 'X' || part === '*';
}

/**
 * Parses a possibly partial version ("1", "1.2", "1.x", "1.2.3-beta.1", "*").
 * Missing or wildcard components are null; everything after the first
 * wildcard is treated as a wildcard too ("1.x.3" is the same as "1.x").
 * Returns null if the text is not a (partial) version.
 */
function parsePartial(text) {
  if (text === '' || text === '*' || text === 'x' || text === 'X') {
    return { major: null, minor: null, patch: null, pre: '' };
  }
  const m = PARTIAL.exec(text);
  if (!m) {
    return null;
  }
  const parts = [m[1], m[2], m[3]];
  const nums = [];
  let wild = false;
  for (const part of parts) {
    wild = wild || isWild(part);
    nums.push(wild ? null : Number(part));
  }
  return {
    major: nums[0],
    minor: nums[1],
    patch: nums[2],
    pre: nums[2] !== null && m[4] ? m[4] : '',
  };
}

function fmt(major, minor, patch, pre) {
  return `${major}.${minor}.${patch}${pre ? `-${pre}` : ''}`;
}

function isFull(pv) {
  return pv.patch !== null;
}

/** Lowest version covered by a partial version: 1.2 -> 1.2.0. */
function floorOf(pv) {
  return fmt(pv.major, pv.minor === null ? 0 : pv.minor, pv.patch === null ? 0 : pv.patch, pv.pre);
}

/** First version above a partial version: 1 -> 2.0.0, 1.2 -> 1.3.0. */
function ceilingOf(pv) {
  if (pv.minor === null) {
    return fmt(pv.major + 1, 0, 0);
  }
  return fmt(pv.major, pv.minor + 1, 0);
}

/** Plain versions and x-ranges, optionally with a primitive operator. */
function expandPrimitive(op, pv) {
  if (pv.major === null) {
    // "<*" and ">*" can never match; everything else with a wildcard is "any".
    return op === '<' || op === '>' ? ['<0.0.0'] : [];
  }
  if (isFull(pv)) {
    return [`${op === '=' ? '' : op}${floorOf(pv)}`];
  }
  switch (op) {
    case '':
    case '=':
      return [`>=${floorOf(pv)}`, `<${ceilingOf(pv)}`];
    case '>=':
      return [`>=${floorOf(pv)}`];
    case '>':
      return [`>=${ceilingOf(pv)}`];
    case '<':
      return [`<${floorOf(pv)}`];
    case '<=':
      return [`<${ceilingOf(pv)}`];
    default:
      throw new TypeError(`Invalid operator: ${op}`);
  }
}

/** ~1.2.3 := >=1.2.3 <1.3.0, ~1.2 := >=1.2.0 <1.3.0, ~1 := >=1.0.0 <2.0.0 */
function expandTilde(pv) {
  if (pv.major === null) {
    return [];
  }
  return [`>=${floorOf(pv)}`, `<${ceilingOf(pv)}`];
}

function caretUpper(major, minor, patch) {
  if (major === 0 && minor === 0 && patch !== null) {
    return [0, 0, patch + 1];
  }
  if (major === 0 && minor === 0) {
    return [0, 1, 0];
  }
  return [major + 1, 0, 0];
}

/** ^1.2.3 := >=1.2.3 <2.0.0, ^0.0.3 := >=0.0.3 <0.0.4, ^1.x := >=1.0.0 <2.0.0 */
function expandCaret(pv) {
  if (pv.major === null) {
    return [];
  }
  const [major, minor, patch] = caretUpper(pv.major, pv.minor, pv.patch);
  return [`>=${floorOf(pv)}`, `<${fmt(major, minor, patch)}`];
}

/** "1.2.3 - 2.3.4" := >=1.2.3 <=2.3.4; a partial upper end covers the whole partial. */
function expandHyphen(from, to) {
  const out = [];
  if (from.major !== null) {
    out.push(`>=${floorOf(from)}`);
  }
  if (to.major !== null) {
    out.push(isFull(to) ? `<=${floorOf(to)}` : `<${ceilingOf(to)}`);
  }
  return out;
}

module.exports = {
  parsePartial,
  expandPrimitive,
  expandTilde,
  expandCaret,
  expandHyphen,
};
