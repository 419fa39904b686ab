'use strict';

const { compareIdentifiers, isNumeric } = require('./identifiers');

const NUM = '0|[1-9]\\d*';
const PRE_ID = `(?:${NUM}|\\d*[a-zA-Z-][a-zA-Z0-9-]*)`;
const BUILD_ID = '[0-9A-Za-z-]+';

const FULL = new RegExp(
  `^v?(${NUM})\\.(${NUM})\\.(${NUM})` +
  `(?:-(${PRE_ID}(?:\\.${PRE_ID})*))?` +
  `(?:\\+(${BUILD_ID}(?:\\.${BUILD_ID})*))?$`
);

const MAX_SAFE_COMPONENT = Number.MAX_SAFE_INTEGER;

class SemVer {
  constructor(version) {
    if (version instanceof SemVer) {
      version = version.raw;
    }
    if (typeof version !== 'string') {
      throw new TypeError(`Invalid version: ${version}`);
    }
    const raw = version.trim();
    const m = FULL.exec(raw);
    if (!m) {
      throw new TypeError(`Invalid version: ${version}`);
    }
    this.raw = raw;
    this.major = Number(m[1]);
    this.minor = Number(m[2]);
    this.patch = Number(m[3]);
    for (const part of ['major', 'minor', 'patch']) {
      if (this[part] > MAX_SAFE_COMPONENT) {
        throw new TypeError(`Invalid ${part} version: ${version}`);
      }
    }
    this.prerelease = m[4]
      ? m[4].split('.').map((id) => (isNumeric(id) ? Number(id) : id))
      : [];
    this.build = m[5] ? m[5].split('.') : [];
    this.version = this.format();
  }

  format() {
    let v = `${this.major}.${this.minor}.${this.patch}`;
    if (this.prerelease.length) {
      v += `-${this.prerelease.join('.')}`;
    }
    return v;
  }

  toString() {
    return this.version;
  }

  compareMain(other) {
    other = toSemVer(other);
    for (const part of ['major', 'minor', 'patch']) {
      if (this[part] !== other[part]) {
        return this[part] < other[part] ? -1 : 1;
      }
    }
    return 0;
  }

  comparePre(other) {
    other = toSemVer(other);
    const a = this.prerelease;
    const b = other.prerelease;
    if (a.length && !b.length) return -1;
    if (!a.length && b.length) return 1;
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (i >= a.length) return -1;
      if (i >= b.length) return 1;
      const c = compareIdentifiers(a[i], b[i]);
      if (c !== 0) return c;
    }
    return 0;
  }

  compare(other) {
    other = toSemVer(other);
    return this.compareMain(other) || this.comparePre(other);
  }

  /**
   * Returns a new SemVer bumped by `release`: 'major', 'minor', 'patch',
   * 'premajor', 'preminor', 'prepatch' or 'prerelease'. `identifier` names
   * the prerelease tag for the pre* kinds (e.g. 'beta' -> 1.3.0-beta.0).
   */
  inc(release, identifier) {
    let { major, minor, patch } = this;
    let pre = this.prerelease.slice();
    const firstPre = identifier ? [identifier, 0] : [0];

    switch (release) {
      case 'major':
        if (!(minor === 0 && patch === 0 && pre.length)) major += 1;
        minor = 0;
        patch = 0;
        pre = [];
        break;
      case 'minor':
        if (!(patch === 0 && pre.length)) minor += 1;
        patch = 0;
        pre = [];
        break;
      case 'patch':
        if (!pre.length) patch += 1;
        pre = [];
        break;
      case 'premajor':
        major += 1;
        minor = 0;
        patch = 0;
        pre = firstPre;
        break;
      case 'preminor':
        minor += 1;
        patch = 0;
        pre = firstPre;
        break;
      case 'prepatch':
        patch += 1;
        pre = firstPre;
        break;
      case 'prerelease':
        if (!pre.length) {
          patch += 1;
          pre = firstPre;
        } else if (identifier && pre[0] !== identifier) {
          pre = firstPre;
        } else {
          let bumped = false;
          for (let i = pre.length - 1; i >= 0; i--) {
            if (typeof pre[i] === 'number') {
              pre[i] += 1;
              bumped = true;
              break;
            }
          }
          if (!bumped) pre.push(0);
        }
        break;
      default:
        throw new Error(`invalid increment argument: ${release}`);
    }
    let out = `${major}.${minor}.${patch}`;
    if (pre.length) out += `-${pre.join('.')}`;
    return new SemVer(out);
  }
}

function toSemVer(v) {
  return v instanceof SemVer ? v : new SemVer(v);
}

module.exports = { SemVer, toSemVer, NUM };
