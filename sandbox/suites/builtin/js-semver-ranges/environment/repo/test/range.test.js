'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const semver = require('..');

test('x-ranges and primitives', () => {
  assert.equal(semver.validRange('1.x'), '>=1.0.0 <2.0.0');
  assert.equal(semver.validRange('1.2.*'), '>=1.2.0 <1.3.0');
  assert.equal(semver.validRange('>1.2'), '>=1.3.0');
  assert.equal(semver.validRange('<=1.2'), '<1.3.0');
  assert.equal(semver.validRange('*'), '*');
  assert.equal(semver.validRange('>= 1.0.0  < 2'), '>=1.0.0 <2.0.0');
  assert.equal(semver.validRange('not a range'), null);
});

test('tilde ranges', () => {
  assert.equal(semver.validRange('~1.2.3'), '>=1.2.3 <1.3.0');
  assert.equal(semver.validRange('~1'), '>=1.0.0 <2.0.0');
  assert.ok(semver.satisfies('1.2.9', '~1.2.3'));
  assert.ok(!semver.satisfies('1.3.0', '~1.2.3'));
});

test('caret ranges', () => {
  assert.equal(semver.validRange('^1.2.3'), '>=1.2.3 <2.0.0');
  assert.equal(semver.validRange('^1.x'), '>=1.0.0 <2.0.0');
  assert.equal(semver.validRange('^0.0.3'), '>=0.0.3 <0.0.4');
  assert.ok(semver.satisfies('1.9.9', '^1.2.3'));
  assert.ok(!semver.satisfies('2.0.0', '^1.2.3'));
  assert.ok(!semver.satisfies('0.0.4', '^0.0.3'));
});

test('hyphen ranges', () => {
  assert.equal(semver.validRange('1.2.3 - 2.3.4'), '>=1.2.3 <=2.3.4');
  assert.equal(semver.validRange('1.2 - 2'), '>=1.2.0 <3.0.0');
  assert.ok(semver.satisfies('2.3.4', '1.2.3 - 2.3.4'));
  assert.ok(!semver.satisfies('2.3.5', '1.2.3 - 2.3.4'));
});

test('union and prereleases', () => {
  assert.ok(semver.satisfies('3.1.0', '^1.2.3 || 3.x'));
  assert.ok(semver.satisfies('1.2.3-beta.4', '^1.2.3-beta.1'));
  assert.ok(!semver.satisfies('1.3.0-beta.1', '^1.2.3-beta.1'));
  assert.ok(!semver.satisfies('2.0.0-rc.1', '^1.2.3'));
});

test('max/min satisfying and minVersion', () => {
  const versions = ['1.2.3', '1.2.10', '1.3.0', '2.0.0'];
  assert.equal(semver.maxSatisfying(versions, '~1.2'), '1.2.10');
  assert.equal(semver.minSatisfying(versions, '^1.2.4'), '1.2.10');
  assert.equal(semver.maxSatisfying(versions, '>3'), null);
  assert.equal(semver.minVersion('>1.2.3 || >=5').version, '1.2.4');
  assert.equal(semver.minVersion('^2.1').version, '2.1.0');
});
