'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const semver = require('..');

test('parse and valid', () => {
  assert.equal(semver.valid('1.2.3'), '1.2.3');
  assert.equal(semver.valid('v1.2.3-alpha.1+build.5'), '1.2.3-alpha.1');
  assert.equal(semver.valid('1.2'), null);
  assert.equal(semver.valid('01.2.3'), null);
  assert.equal(semver.clean('  =v1.2.3 '), '1.2.3');
  const v = semver.parse('1.2.3-rc.10+sha.abc');
  assert.deepEqual(v.prerelease, ['rc', 10]);
  assert.deepEqual(v.build, ['sha', 'abc']);
});

test('precedence follows the spec example', () => {
  const ordered = [
    '1.0.0-alpha',
    '1.0.0-alpha.1',
    '1.0.0-alpha.beta',
    '1.0.0-beta',
    '1.0.0-beta.2',
    '1.0.0-beta.11',
    '1.0.0-rc.1',
    '1.0.0',
  ];
  for (let i = 1; i < ordered.length; i++) {
    assert.ok(semver.lt(ordered[i - 1], ordered[i]), `${ordered[i - 1]} < ${ordered[i]}`);
  }
  assert.deepEqual(semver.sort(ordered.slice().reverse()), ordered);
});

test('cmp operators', () => {
  assert.ok(semver.cmp('1.2.3', '>=', '1.2.3'));
  assert.ok(semver.cmp('1.2.3', '!=', '1.2.4'));
  assert.ok(!semver.cmp('1.2.3', '>', '1.2.3'));
  assert.throws(() => semver.cmp('1.2.3', '=>', '1.2.3'), TypeError);
});

test('inc', () => {
  assert.equal(semver.inc('1.2.3', 'major'), '2.0.0');
  assert.equal(semver.inc('1.2.3', 'minor'), '1.3.0');
  assert.equal(semver.inc('1.2.3', 'patch'), '1.2.4');
  assert.equal(semver.inc('1.2.3-beta.1', 'patch'), '1.2.3');
  assert.equal(semver.inc('1.2.3', 'preminor', 'beta'), '1.3.0-beta.0');
  assert.equal(semver.inc('1.2.3-beta.1', 'prerelease'), '1.2.3-beta.2');
  assert.equal(semver.inc('1.2.3', 'bogus'), null);
});

test('diff', () => {
  assert.equal(semver.diff('1.2.3', '2.0.0'), 'major');
  assert.equal(semver.diff('1.2.3', '1.2.4-rc.1'), 'prepatch');
  assert.equal(semver.diff('1.2.3', '1.2.3'), null);
});
