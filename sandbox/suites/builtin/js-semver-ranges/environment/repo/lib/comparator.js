'use strict';

const { SemVer } = require('./semver');
const { cmp } = require('./functions');

const ANY = Symbol('any version');
const COMPARATOR = /^(<=|>=|<|>|=|)\s*(\S+)$/;

/**
 * A single primitive comparison such as ">=1.2.3" or "<2.0.0". An empty
 * comparator ("" or "*") matches every version.
 */
class Comparator {
  constructor(text) {
    if (text instanceof Comparator) {
      return text;
    }
    text = String(text).trim();
    if (text === '' || text === '*') {
      this.operator = '';
      this.semver = ANY;
      this.value = '';
      return;
    }
    const m = COMPARATOR.exec(text);
    if (!m) {
      throw new TypeError(`Invalid comparator: ${text}`);
    }
    this.operator = m[1] === '=' ? '' : m[1];
    this.semver = new SemVer(m[2]);
    this.value = this.operator + this.semver.version;
  }

  get isAny() {
    return this.semver === ANY;
  }

  test(version) {
    if (this.semver === ANY) {
      return true;
    }
    return cmp(version, this.operator, this.semver);
  }

  toString() {
    return this.value;
  }
}

Comparator.ANY = ANY;

module.exports = { Comparator, ANY };
